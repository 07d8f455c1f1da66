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

from typing import Any

import numpy as np

from simcore.emulator.inputs import read_comm_groups, read_network, read_remote_memory, read_system
from simcore.emulator.load import read_programs
from simcore.emulator.run import simulate_astra
from simcore.network.collectives.et_graphs import build_collective, write_collective
from simcore.traces.chakra.et import read_trace
from simcore.traces.chakra.export import write_comm_groups, write_traces
from simcore.traces.chakra.json import trace_to_json
from simcore.traces.msccl import msccl_to_traces

__all__ = [
    "build_collective",
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
    "write_collective",
    "write_comm_groups",
    "write_traces",
]


def _durations(model: Any, parallel: Any, system: Any) -> tuple[Any, Any, Any]:
    """(checked parallel, compiled workload, (U,) template durations in s) of one point."""
    from simcore.api import check_structure, compiled_workload
    from simcore.engine.evaluate import template_durations
    from simcore.errors import InputError
    from simcore.hardware import SystemBatch

    par, reason = check_structure(model, parallel, system)
    if par is None:
        raise InputError("structure", model.name, reason)
    cw = compiled_workload(model, parallel, system)
    seconds = template_durations(cw, SystemBatch.from_specs([system]), par.precision)[:, 0]
    return par, cw, seconds


def chrome_trace(model: Any, parallel: Any, system: Any) -> dict[str, Any]:
    """The Chrome-trace (Perfetto) timeline of the representative ranks of one design point."""
    from simcore.engine.trace import chrome_trace as _chrome_trace

    _, cw, seconds = _durations(model, parallel, system)
    return _chrome_trace(cw, seconds)


def workload_traces(model: Any, parallel: Any, system: Any) -> tuple[dict[int, Any], Any]:
    """(rank -> Chakra ET trace, communicator groups) of the configured workload; compute
    durations are the direct simulation's."""
    from simcore.workloads.transformer.export import transformer_to_traces

    par, cw, seconds = _durations(model, parallel, system)
    traces, groups = transformer_to_traces(cw.workload, par, np.asarray(seconds) * 1e6)
    return traces, groups
