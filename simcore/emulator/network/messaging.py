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
    __slots__ = ("arrived", "channel", "index", "recv_arg", "recv_cb", "send_arg", "send_cb")

    def __init__(self, channel: _Channel, index: int) -> None:
        self.channel = channel
        self.index = index
        self.arrived = False
        self.send_cb: Handler | None = None
        self.send_arg: Any = None
        self.recv_cb: Handler | None = None
        self.recv_arg: Any = None


class _Channel:
    """The messages of one key: counters of sends and recvs, and the k-th exchanges still open."""

    __slots__ = ("open", "posted", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.posted = 0
        self.open: dict[int, _Entry] = {}


class Messenger:
    """Matches sends with recvs by ``(tag, src, dst, size)`` in FIFO order per key."""

    def __init__(self, network: NetworkBackend) -> None:
        self.network = network
        self._channels: dict[Key, _Channel] = {}

    def send(
        self, src: int, dst: int, tag: int, size: int, on_done: Handler | None, arg: Any,
        route_dst: int | None = None,
    ) -> None:
        """Inject a message; ``on_done(arg)`` runs at its arrival. ``route_dst`` = real destination."""
        key = (tag, src, dst, size)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel()
        index = channel.sent
        channel.sent = index + 1
        entry = channel.open.get(index)
        route = dst if route_dst is None else route_dst
        if entry is None:
            entry = channel.open[index] = _Entry(channel, index)
        elif on_done is None:  # matched already and no sender callback: the arrival only completes the recv
            del channel.open[index]
            self.network.send(src, route, size, entry.recv_cb, entry.recv_arg)  # type: ignore[arg-type]
            return
        entry.send_cb, entry.send_arg = on_done, arg
        self.network.send(src, route, size, self._arrive, entry)

    def recv(self, src: int, dst: int, tag: int, size: int, on_done: Handler, arg: Any) -> None:
        """Post a receive; ``on_done(arg)`` runs when the matching message has arrived."""
        key = (tag, src, dst, size)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel()
        index = channel.posted
        channel.posted = index + 1
        entry = channel.open.get(index)
        if entry is None:
            entry = channel.open[index] = _Entry(channel, index)
        if entry.arrived:
            del channel.open[index]
            on_done(arg)
        else:
            entry.recv_cb, entry.recv_arg = on_done, arg

    def _arrive(self, entry: _Entry) -> None:
        entry.arrived = True
        if entry.send_cb is not None:
            entry.send_cb(entry.send_arg)
        if entry.recv_cb is not None:
            del entry.channel.open[entry.index]
            entry.recv_cb(entry.recv_arg)

    def unmatched(self) -> int:
        """Number of sends or recvs still waiting for their partner."""
        return sum(len(channel.open) for channel in self._channels.values())
