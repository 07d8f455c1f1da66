"""Send/recv matching of the analytical front end (reference §1.1, ``CommonNetworkApi.cc``).

Messages match on ``(tag, src, dst, size)``; the k-th send with a key matches the k-th recv with
that key (ASTRA-sim's per-key chunk-id counters). **Both callbacks fire when the message
arrives**: the sender is not released at the end of serialization. A recv posted after the
arrival completes at once. ``deliver_to`` lets a symmetry-reduced run deliver a message to the
representative of the real destination while the network still costs the real route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Messenger", "NetworkBackend"]

Handler = Callable[[Any], None]
Key = tuple[int, int, int, int]


class NetworkBackend(Protocol):
    """What :class:`Messenger` needs from a network: inject a message with an arrival callback."""

    def send(self, src: int, dst: int, size_bytes: int, callback: Handler, arg: Any) -> None: ...


class _Entry:
    __slots__ = ("arrived", "recv_arg", "recv_cb", "send_arg", "send_cb")

    def __init__(self) -> None:
        self.arrived = False
        self.send_cb: Handler | None = None
        self.send_arg: Any = None
        self.recv_cb: Handler | None = None
        self.recv_arg: Any = None


class Messenger:
    """Matches sends with recvs by ``(tag, src, dst, size)`` in FIFO order per key."""

    def __init__(self, network: NetworkBackend) -> None:
        self.network = network
        self._sent: dict[Key, int] = {}
        self._posted: dict[Key, int] = {}
        self._entries: dict[tuple[Key, int], _Entry] = {}

    def send(
        self, src: int, dst: int, tag: int, size: int, on_done: Handler | None, arg: Any,
        route_dst: int | None = None,
    ) -> None:
        """Inject a message; ``on_done(arg)`` runs at its arrival. ``route_dst`` = real destination."""
        key = (tag, src, dst, size)
        index = self._sent.get(key, 0)
        self._sent[key] = index + 1
        entry = self._entries.get((key, index))
        if entry is None:
            entry = self._entries[(key, index)] = _Entry()
        entry.send_cb, entry.send_arg = on_done, arg
        self.network.send(src, dst if route_dst is None else route_dst, size, self._arrive, (key, index))

    def recv(self, src: int, dst: int, tag: int, size: int, on_done: Handler, arg: Any) -> None:
        """Post a receive; ``on_done(arg)`` runs when the matching message has arrived."""
        key = (tag, src, dst, size)
        index = self._posted.get(key, 0)
        self._posted[key] = index + 1
        entry = self._entries.get((key, index))
        if entry is None:
            entry = self._entries[(key, index)] = _Entry()
        if entry.arrived:
            del self._entries[(key, index)]
            on_done(arg)
        else:
            entry.recv_cb, entry.recv_arg = on_done, arg

    def _arrive(self, slot: tuple[Key, int]) -> None:
        entry = self._entries[slot]
        entry.arrived = True
        if entry.send_cb is not None:
            entry.send_cb(entry.send_arg)
        if entry.recv_cb is not None:
            del self._entries[slot]
            entry.recv_cb(entry.recv_arg)

    def unmatched(self) -> int:
        """Number of sends or recvs still waiting for their partner."""
        return len(self._entries)
