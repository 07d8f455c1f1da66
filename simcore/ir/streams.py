"""Typed streams and communication kinds: what an in-order resource of a graph *is*.

A workload graph's nodes occupy in-order resources (CUDA-stream-like queues, :mod:`simcore.ir.graph`).
The engine and the fidelities need to know which stage a stream belongs to and what runs on it
(the stage's compute stream, one of its communication streams, or a pipeline link from stage
``a`` to stage ``b``). That is carried here as typed values, interned per resource as small-int
arrays on the graph (``Graph.stream_kind``, ``stream_stage``, ``stream_peer``), so nobody parses
resource names.

- :class:`CommKind`: the communication kinds of the exposed-communication breakdown (tensor,
  data, pipeline, context, expert parallelism; Megatron-LM's process groups). A template's kind
  (:attr:`simcore.ir.ops.OpTable.template_kind`) is a :class:`CommKind` value or
  :data:`simcore.ir.ops.COMPUTE`.
- :class:`StreamKind` / :class:`Stream`: a stream's role and owner. Its :attr:`Stream.name` is the
  label shown in timelines (``s3.compute``, ``s3.tp``, ``pp2>3``); the label is derived from the
  typed value, never the other way round.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

__all__ = ["COMM_KINDS", "CommKind", "Stream", "StreamKind", "comm_kind_of_stream"]


class CommKind(IntEnum):
    """Communication kinds, in the order of the breakdown (``exposed_comm_<kind>_s``)."""

    TP = 0
    DP = 1
    PP = 2
    CP = 3
    EP = 4


#: lower-case names of :class:`CommKind`, indexed by value
COMM_KINDS: tuple[str, ...] = tuple(k.name.lower() for k in CommKind)


class StreamKind(IntEnum):
    """What runs on an in-order stream of a representative rank (a pipeline stage)."""

    OTHER = 0  #: untyped (graphs read from traces): the name is all there is
    COMPUTE = 1  #: kernels and blocking collectives
    TP = 2  #: overlapped tensor-parallel collectives
    CP = 3  #: context-parallel KV exchange
    DP = 4  #: gradient reduction and parameter gathers
    EMB = 5  #: the tied-embedding all-reduce of the first and last stage
    LINK = 6  #: pipeline sends from ``stage`` to ``peer``
    COMM = 7  #: one merged communication stream (ASTRA-sim's one op in flight per NPU)
    EP = 8  #: expert-parallel all-to-all pipelined with the experts' GEMMs


_LABEL = {StreamKind.COMPUTE: "compute", StreamKind.TP: "tp", StreamKind.CP: "cp",
          StreamKind.DP: "dp", StreamKind.EMB: "emb", StreamKind.COMM: "comm",
          StreamKind.EP: "ep"}

_COMM_OF = {StreamKind.TP: CommKind.TP, StreamKind.CP: CommKind.CP, StreamKind.DP: CommKind.DP,
            StreamKind.EMB: CommKind.DP, StreamKind.LINK: CommKind.PP,
            StreamKind.EP: CommKind.EP}


class Stream(NamedTuple):
    """A typed stream: ``kind`` of stage ``stage`` (a link: from ``stage`` to ``peer``)."""

    kind: StreamKind
    stage: int = -1
    peer: int = -1

    @property
    def name(self) -> str:
        """Timeline label: ``s<stage>.<kind>`` or ``pp<stage>><peer>`` for a link."""
        if self.kind == StreamKind.LINK:
            return f"pp{self.stage}>{self.peer}"
        return f"s{self.stage}.{_LABEL[self.kind]}"

    @property
    def is_compute(self) -> bool:
        """Whether this is a stage's compute stream."""
        return self.kind == StreamKind.COMPUTE

    @staticmethod
    def compute(stage: int) -> Stream:
        """Stage ``stage``'s compute stream."""
        return Stream(StreamKind.COMPUTE, stage)

    @staticmethod
    def link(src: int, dst: int) -> Stream:
        """The pipeline link from stage ``src`` to stage ``dst``."""
        return Stream(StreamKind.LINK, src, dst)


def comm_kind_of_stream(kind: StreamKind) -> CommKind | None:
    """The communication kind a stream carries (None for compute, merged or untyped streams)."""
    return _COMM_OF.get(kind)
