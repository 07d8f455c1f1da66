"""MSCCL-IR XML (MSCCLang's output) -> per-rank Chakra ET collective graphs.

Input (reference/astra-sim-and-chakra.md §4.4): ``<algo name proto nchannels nchunksperloop ngpus
coll inplace>`` holding ``<gpu id i_chunks o_chunks s_chunks>``, each holding threadblocks
``<tb id send recv chan>`` of ``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``.
Conversion rules (the collectiveapi ``mscclang2chakra_converter``, §4.4 and
methods-hap-ace-echo.md §5.2):
- one ET per GPU, node ids from 0 (here in a topological order);
- ``s`` -> COMM_SEND with ``comm_dst`` = the tb's ``send`` peer, ``comm_tag`` = ``chan``;
- ``r`` -> COMM_RECV with ``comm_src`` = the tb's ``recv`` peer, ``comm_tag`` = ``chan``;
- ``rrc`` -> COMM_RECV then a COMP node (the reduction) with a data dep on it;
- ``nop`` is elided (whoever depends on it depends on its dependencies instead);
- (extension) the fused instructions ``rcs`` -> RECV, SEND; ``rrs`` / ``rrcs`` -> RECV, COMP,
  SEND (each node waiting for the one before);
- every step has a data dep on the previous step of its threadblock and on step ``deps`` of
  threadblock ``depid`` (-1 = none);
- message bytes = collective size / input chunks (``i_chunks``, else ``nchunksperloop``) x
  ``cnt``; a reduction lasts floor(3 x bytes / (50 GB/s)) us (the converter's hard-coded
  model; e.g. 131072 B -> 7 us as in the shipped 8-NPU ring example).
Malformed XML or references are :class:`InputError` naming the element.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from simcore.errors import InputError
from simcore.limits import check_number, limit
from simcore.traces.chakra.build import EtTraceBuilder
from simcore.traces.chakra.schema import NodeType
from simcore.traces.chakra.trace import EtTrace

__all__ = ["MscclAlgorithm", "msccl_to_traces", "parse_msccl"]

REDUCE_BANDWIDTH_GBPS = 50.0
_TYPES = {"s", "r", "rrc", "nop", "rcs", "rrs", "rrcs"}


@dataclass(frozen=True)
class _Step:
    tb: int
    s: int
    kind: str
    cnt: int
    depid: int
    deps: int


@dataclass
class _Gpu:
    gid: int
    i_chunks: int
    tbs: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # id -> send, recv, chan
    steps: dict[tuple[int, int], _Step] = field(default_factory=dict)


@dataclass(frozen=True)
class MscclAlgorithm:
    """A parsed MSCCL-IR algorithm."""

    name: str
    collective: str
    num_gpus: int
    chunks_per_loop: int
    gpus: tuple[_Gpu, ...]


_MAX_COUNT = 1 << 20  # chunks, steps, threadblocks, channels of one algorithm


def _int(elem: ET.Element, key: str, where: str, default: int | None = None,
         lo: int = -1, hi: float = _MAX_COUNT) -> int:
    """An integer attribute in ``[lo, hi]`` (README "Limits and bounds")."""
    raw = elem.get(key)
    if raw is None:
        if default is None:
            raise InputError(f"{where}.{key}", None, "attribute is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{where}.{key}", raw, "must be an integer") from None
    return int(check_number(f"{where}.{key}", value, lo=lo, hi=hi, integer=True))


def parse_msccl(text: str, source: str = "msccl") -> MscclAlgorithm:
    """Parse MSCCL-IR XML text.

    Raises:
        InputError: not XML, not an ``<algo>``, missing/invalid attributes, unknown step type.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise InputError(source, str(err), "not well-formed XML") from None
    if root.tag != "algo":
        raise InputError(f"{source} root", root.tag, "must be <algo>")
    ngpus = _int(root, "ngpus", f"{source} algo", lo=1, hi=limit("graph_ranks"))
    per_loop = _int(root, "nchunksperloop", f"{source} algo", 1, lo=1)
    gpus = []
    for g in root.iter("gpu"):
        gid = _int(g, "id", f"{source} gpu", lo=0)
        gpu = _Gpu(gid, _int(g, "i_chunks", f"{source} gpu {gid}", 0, lo=0) or per_loop)
        for tb in g.iter("tb"):
            where = f"{source} gpu {gid} tb"
            tid = _int(tb, "id", where, lo=0)
            gpu.tbs[tid] = (_int(tb, "send", where, -1, hi=ngpus - 1), _int(tb, "recv", where, -1, hi=ngpus - 1),
                            _int(tb, "chan", where, 0, lo=0))
            for st in tb.iter("step"):
                w = f"{source} gpu {gid} tb {tid} step"
                kind = st.get("type", "")
                if kind not in _TYPES:
                    raise InputError(f"{w}.type", kind, f"must be one of {sorted(_TYPES)}")
                s = _int(st, "s", w, lo=0)
                gpu.steps[(tid, s)] = _Step(tid, s, kind, _int(st, "cnt", w, 1, lo=0),
                                            _int(st, "depid", w, -1), _int(st, "deps", w, -1))
        gpus.append(gpu)
    ids = sorted(g.gid for g in gpus)
    if ids != list(range(ngpus)):
        raise InputError(f"{source} gpu ids", ids[:8], f"must be 0..{ngpus - 1}")
    return MscclAlgorithm(root.get("name", ""), root.get("coll", ""), ngpus, per_loop,
                          tuple(sorted(gpus, key=lambda g: g.gid)))


def _all_deps(gpu: _Gpu, source: str) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Each step's dependencies: the previous step of its tb, and (depid, deps)."""
    deps: dict[tuple[int, int], list[tuple[int, int]]] = {}
    prev: tuple[int, int] | None = None
    for key in sorted(gpu.steps):
        step = gpu.steps[key]
        mine = [prev] if prev is not None and prev[0] == step.tb else []
        if step.depid >= 0:
            ref = (step.depid, step.deps)
            if ref not in gpu.steps:
                raise InputError(f"{source} gpu {gpu.gid} tb {step.tb} step {step.s}.depid/deps",
                                 ref, "names no step of this GPU")
            mine.append(ref)
        deps[key] = mine
        prev = key
    return deps


def _topological(deps: dict[tuple[int, int], list[tuple[int, int]]], gid: int, source: str) -> list[tuple[int, int]]:
    """Kahn's order, ties broken by (tb, step)."""
    import heapq

    waiting = {k: len(set(v)) for k, v in deps.items()}
    users: dict[tuple[int, int], list[tuple[int, int]]] = {k: [] for k in deps}
    for k, v in deps.items():
        for d in set(v):
            users[d].append(k)
    ready = [k for k, c in waiting.items() if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(deps):
        stuck = min(k for k in deps if waiting[k] > 0)
        raise InputError(f"{source} gpu {gid} step", stuck, "step dependencies form a cycle")
    return order


# step type -> the nodes it becomes, in order (each waits for the one before)
_EXPANSION = {
    "s": ("send",), "r": ("recv",), "rrc": ("recv", "reduce"),
    # fused MSCCLang instructions (an extension of the converter's four types):
    "rcs": ("recv", "send"), "rrs": ("recv", "reduce", "send"), "rrcs": ("recv", "reduce", "send"),
}


def _gpu_trace(alg: MscclAlgorithm, gpu: _Gpu, coll_size: int, source: str) -> EtTrace:
    chunk = coll_size // gpu.i_chunks
    b = EtTraceBuilder(metadata={"schema": "1.0.2-chakra.0.0.4", "collective": alg.collective})
    last: dict[tuple[int, int], list[int]] = {}  # step -> node ids a dependant must wait for
    step_deps = _all_deps(gpu, source)
    for key in _topological(step_deps, gpu.gid, source):
        step = gpu.steps[key]
        send, recv, chan = gpu.tbs[step.tb]
        deps = sorted({n for d in step_deps[key] for n in last[d]})
        size = chunk * step.cnt
        name = f"{alg.name}_gpu{gpu.gid}_tb{step.tb}_s{step.s}"
        where = f"{source} gpu {gpu.gid} tb {step.tb}"
        for part in _EXPANSION.get(step.kind, ()):
            common = {"is_cpu_op": False, "comm_size": size, "comm_tag": chan}
            if part == "send":
                if send < 0:
                    raise InputError(f"{where}.send", send, "a send step needs a send peer")
                nid = b.add_node(len(b), name + "_send", NodeType.COMM_SEND_NODE, data_deps=deps,
                                 attrs={**common, "comm_src": gpu.gid, "comm_dst": send})
            elif part == "recv":
                if recv < 0:
                    raise InputError(f"{where}.recv", recv, "a receive step needs a recv peer")
                nid = b.add_node(len(b), name + "_recv", NodeType.COMM_RECV_NODE, data_deps=deps,
                                 attrs={**common, "comm_src": recv, "comm_dst": gpu.gid})
            else:
                micros = int(3 * size / (REDUCE_BANDWIDTH_GBPS * 1e9) * 1e6)
                nid = b.add_node(len(b), name + "_reduce", NodeType.COMP_NODE, data_deps=deps,
                                 duration_micros=micros, attrs={"is_cpu_op": False, "tensor_size": size})
            deps = [nid]
        last[key] = deps  # a nop passes its own dependencies on
    return b.build(path=f"{source} gpu {gpu.gid}")


def msccl_to_traces(xml: str | Path, coll_size: int, source: str | None = None) -> list[EtTrace]:
    """Convert MSCCL-IR (XML text or a path to it) to one ET per GPU, for ``coll_size`` bytes.

    Raises:
        InputError: malformed XML, a bad reference, or a size smaller than the chunk count.
    """
    if isinstance(xml, Path) or (isinstance(xml, str) and not xml.lstrip().startswith("<")):
        path = Path(xml)
        text, src = path.read_text(), source or str(path)
    else:
        text, src = str(xml), source or "msccl"
    alg = parse_msccl(text, src)
    check_number("coll_size", coll_size, lo=1, hi=limit("bytes"), integer=True)
    if coll_size < max(g.i_chunks for g in alg.gpus):
        raise InputError("coll_size", coll_size, "must be at least the number of input chunks")
    return [_gpu_trace(alg, g, coll_size, src) for g in alg.gpus]
