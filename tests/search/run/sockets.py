"""Listening TCP sockets of a process tree, read from /proc (Linux; no psutil needed)."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (by parent pid in /proc/<pid>/stat)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def _inodes(pids: set[int]) -> set[int]:
    out: set[int] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    out.add(int(link[8:-1]))
        except OSError:
            continue
    return out


def _addr(hex_addr: str) -> str:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in raw[::-1])
    else:  # /proc/net/tcp6: four little-endian 32-bit words
        words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
        ip = ":".join(b"".join(words)[i:i + 2].hex() for i in range(0, 16, 2))
    return f"{ip}:{int(port, 16)}"


def listening_sockets(root: int) -> list[str]:
    """``address:port`` of every TCP socket in LISTEN state owned by ``root``'s process tree."""
    return listening_sockets_of(descendants(root))


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8 and ::1 (an ``address:port`` string from :func:`listening_sockets`)."""
    ip = address.rsplit(":", 1)[0]
    return ip.startswith("127.") or ip == "0000:0000:0000:0000:0000:0000:0000:0001" \
        or ip.startswith("0000:0000:0000:0000:0000:ffff:7f")


def listeners_by_process(root: int) -> list[tuple[str, str]]:
    """(process name, ``address:port``) of every listening TCP socket of ``root``'s tree."""
    out = []
    for pid in descendants(root):
        try:
            name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()[-40:]
        except OSError:
            continue
        out += [(name, a) for a in listening_sockets_of({pid})]
    return out


def listening_sockets_of(pids: set[int]) -> list[str]:
    """``address:port`` of every TCP socket in LISTEN state owned by one of ``pids``."""
    inodes = _inodes(pids)
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[9]) in inodes:
                out.append(_addr(cols[1]))
    return out
