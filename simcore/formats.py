"""Public entry points for the files simcore reads and writes, for the ``simsweep`` commands.

The commands talk to :mod:`simcore.api` (simulation) and to this module (file formats) only;
the modules behind it may move without touching a command:

* Chakra execution traces (reference/astra-sim-and-chakra.md §4): read, JSON view, the
  configured workload as per-rank ET files and communicator groups;
* ASTRA-sim inputs (system JSON, network YAML, remote-memory and comm-group JSON) and the
  emulator that runs them;
* custom-collective ET files of a native algorithm, and MSCCL-IR XML converted to ET files;
* the Chrome-trace (Perfetto) timeline of one design point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from simcore._lazy import load_lazy

if TYPE_CHECKING:
    from simcore.emulator.inputs import (
        read_comm_groups,
        read_network,
        read_remote_memory,
        read_system,
    )
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra
    from simcore.network.collectives.et_graphs import build_collective, write_collective
    from simcore.traces.chakra.et import check_prefix, read_trace
    from simcore.traces.chakra.export import write_comm_groups, write_traces
    from simcore.traces.chakra.json import trace_to_json
    from simcore.traces.msccl import msccl_to_traces

# imported on first use (PEP 562): ``simsweep astra`` imports the emulator, not the exporters
_LAZY = {
    "read_comm_groups": "simcore.emulator.inputs", "read_network": "simcore.emulator.inputs",
    "read_remote_memory": "simcore.emulator.inputs", "read_system": "simcore.emulator.inputs",
    "read_programs": "simcore.emulator.load", "simulate_astra": "simcore.emulator.run",
    "build_collective": "simcore.network.collectives.et_graphs",
    "write_collective": "simcore.network.collectives.et_graphs", "read_trace": "simcore.traces.chakra.et",
    "check_prefix": "simcore.traces.chakra.et",
    "write_comm_groups": "simcore.traces.chakra.export", "write_traces": "simcore.traces.chakra.export",
    "trace_to_json": "simcore.traces.chakra.json", "msccl_to_traces": "simcore.traces.msccl",
}


def __getattr__(name: str) -> Any:
    return load_lazy(__name__, _LAZY, globals(), name)

__all__ = [
    "astra_system_files",
    "build_collective",
    "check_prefix",
    "chrome_trace",
    "msccl_to_traces",
    "read_comm_groups",
    "read_network",
    "read_programs",
    "read_remote_memory",
    "read_system",
    "read_trace",
    "simulate_astra",
    "trace_to_json",
    "workload_traces",
    "import_execution_trace",
    "trace_model",
    "write_collective",
    "write_step",
    "network_backends",
    "write_comm_groups",
    "write_workload",
    "write_traces",
]


def chrome_trace(model: Any, parallel: Any, system: Any,
                 fidelity: str = "calibrated") -> dict[str, Any]:
    """The Chrome-trace (Perfetto) timeline of the representative ranks of one design point,
    drawn from the schedule ``fidelity`` evaluates (its durations and overlap slowdown)."""
    from simcore.api import evaluated_durations
    from simcore.engine.trace import chrome_trace as _chrome_trace

    cw, seconds, slowdown = evaluated_durations(model, parallel, system, fidelity)
    return _chrome_trace(cw, seconds, slowdown)


def workload_traces(model: Any, parallel: Any, system: Any) -> tuple[dict[int, Any], Any]:
    """(rank -> Chakra ET trace, communicator groups) of the configured workload, through its
    family's exporter; compute durations are the direct simulation's."""
    from simcore.api import check_structure, compiled_workload
    from simcore.engine.evaluate import template_durations
    from simcore.errors import InputError
    from simcore.hardware import SystemBatch
    from simcore.workloads import family_of
    from simcore.workloads.layout import RankLayout

    par, reason = check_structure(model, parallel, system)
    if par is None:
        raise InputError("structure", model.name, reason)
    cw = compiled_workload(model, parallel, system)
    _pieces_only(cw)
    seconds = template_durations(cw, SystemBatch.from_specs([system]), par.precision)[:, 0]
    layout = RankLayout.of(par, system.gpus_per_node)
    return family_of(model).export_traces(cw.workload, layout, np.asarray(seconds) * 1e6)


def _pieces_only(cw: Any) -> None:
    """A Chakra export writes every op of the graph: closed-form blocks
    (``parallel.overlap_blocks``) have no pieces to write."""
    from simcore.errors import InputError

    if cw.blocks:
        raise InputError("parallel.overlap_blocks", True,
                         "a Chakra export writes every piece of the TP overlap and CP rings: "
                         "set it false")


def trace_model(*args: Any, **kwargs: Any) -> Any:
    """Record one training step of a PyTorch model (:func:`simcore.traces.pytorch.api.trace_model`;
    PyTorch is imported only here, lazily)."""
    from simcore.traces.pytorch.api import trace_model as _trace_model

    return _trace_model(*args, **kwargs)


def write_step(*args: Any, **kwargs: Any) -> Any:
    """Write a traced step as a Chakra ET (:func:`simcore.traces.pytorch.api.write_step`)."""
    from simcore.traces.pytorch.api import write_step as _write_step

    return _write_step(*args, **kwargs)


def import_execution_trace(*args: Any, **kwargs: Any) -> Any:
    """A PyTorch execution trace (JSON) as Chakra ET
    (:func:`simcore.traces.pytorch.api.import_execution_trace`)."""
    from simcore.traces.pytorch.api import import_execution_trace as _import

    return _import(*args, **kwargs)


def write_workload(out: str, model: Any, parallel: Any, system: Any
                   ) -> tuple[list[Any], int, dict[int, tuple[int, ...]]]:
    """Write the configured workload as ``<out>.<rank>.et`` (one Chakra ET per rank; compute
    durations are the direct simulation's) through its family's exporter, using the family's
    fast file path (``export_files``: each distinct node encoded once) where it has one. The
    total (ranks x nodes of a rank's stage) is bounded by ``export_nodes`` before anything is
    written (:mod:`simcore.limits`).

    Returns:
        (paths written, total nodes, communicator groups).
    """
    from simcore.api import check_structure, compiled_workload
    from simcore.engine.evaluate import template_durations
    from simcore.errors import InputError
    from simcore.hardware import SystemBatch
    from simcore.limits import limit
    from simcore.traces.chakra.export import write_files
    from simcore.workloads import family_of
    from simcore.workloads.layout import RankLayout

    par, reason = check_structure(model, parallel, system)
    if par is None:
        raise InputError("structure", model.name, reason)
    cw = compiled_workload(model, parallel, system)
    _pieces_only(cw)
    micros = np.asarray(template_durations(cw, SystemBatch.from_specs([system]),
                                           par.precision)[:, 0]) * 1e6
    layout = RankLayout.of(par, system.gpus_per_node)
    condensed = getattr(cw.workload, "condensed", None)  # its node count needs no node built
    graph_nodes = condensed.chains.num_nodes if condensed is not None else cw.workload.graph.num_nodes
    per_rank = graph_nodes / max(cw.workload.num_stages, 1)  # a rank runs its stage's program
    cap = limit("export_nodes")
    if per_rank * layout.num_ranks > cap:
        raise InputError("system.num_gpus", system.num_gpus,
                         f"exporting {layout.num_ranks} ranks x ~{per_rank:.3g} nodes each is "
                         f"~{per_rank * layout.num_ranks:.3g} Chakra nodes, more than {cap:.3g} "
                         "(limit export_nodes, SIMSWEEP_MAX_EXPORT_NODES)")
    family = family_of(model)
    export_files = getattr(family, "export_files", None)
    if export_files is not None:
        files, nodes, groups = export_files(cw.workload, layout, micros)
        return list(write_files(out, files)), int(nodes), groups
    from simcore.traces.chakra.export import write_traces  # lazy (see _LAZY)

    traces, groups = family.export_traces(cw.workload, layout, micros)
    paths = write_traces(out, [traces[r] for r in range(len(traces))])
    return list(paths), sum(t.num_nodes for t in traces.values()), groups


def network_backends() -> tuple[str, ...]:
    """The names of the emulator's network backends (``simsweep astra --network-backend``)."""
    from simcore.emulator.network import BACKENDS

    return tuple(BACKENDS)


def astra_system_files(system: Any) -> tuple[dict[str, Any], str]:
    """(system JSON, network YAML) of the system ASTRA-sim sees for ``system``
    (:mod:`simcore.fidelity.astra.export_system`)."""
    from simcore.fidelity.astra.export_system import network_yaml, system_json

    return system_json(system), network_yaml(system)
