"""A journal-file backend that batches Optuna's per-operation appends into one write per batch.

Optuna's ``JournalFileBackend`` appends and ``fsync``\\ s once per storage operation (every
``suggest``, user attribute, constraint and ``tell``), about fifteen per trial, so a search of
a fast simulator spends most of its time in the file system. This backend keeps the appends in
memory and writes them with one lock and one ``fsync`` when the driver calls :meth:`flush`:
after a batch is asked (its trials are then RUNNING on disk with their parameters, so a killed
driver's batch is recovered on resume) and after it is told. Reads see the file, then the
buffer, so the storage replays its own pending operations at once.

It assumes one writing driver per journal file (the local default); drivers that share a study
use an RDB URL (``search.storage``).

Every write holds Ctrl-C until the file lock is released (:class:`InterruptSafeJournalFileBackend`):
Optuna's symlink lock turns an interrupt that lands inside ``release`` before its rename into a
``FileNotFoundError`` of the renamed lock file (its handler unlinks a file the rename never
made), so an interrupted search ended with "file not found" instead of saying how to resume.
The interrupt is raised as soon as the write is done.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalFileBackend

__all__ = ["BufferedJournalFileBackend", "InterruptSafeJournalFileBackend", "interrupts_held"]


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT inside the block and deliver it to the previous handler when the block ends
    (only in the main thread, where Python runs signal handlers; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt here
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)


class InterruptSafeJournalFileBackend(JournalFileBackend):
    """Optuna's journal file, each append under :func:`interrupts_held` (module docstring)."""

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append ``logs`` under the file lock; a Ctrl-C meanwhile is raised afterwards."""
        with interrupts_held():
            super().append_logs(logs)


class BufferedJournalFileBackend(BaseJournalBackend):
    """Buffers :meth:`append_logs` until :meth:`flush` (see module docstring)."""

    def __init__(self, file_path: str) -> None:
        self._file = InterruptSafeJournalFileBackend(file_path)
        self._file_count = 0  # logs known to be in the file
        self._buffer: list[dict[str, Any]] = []

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        """File logs from ``log_number_from``, then the buffered ones."""
        if log_number_from <= self._file_count or not self._buffer:
            count = log_number_from
            for log in self._file.read_logs(log_number_from):
                count += 1
                yield log
            self._file_count = max(self._file_count, count)
        start = max(0, log_number_from - self._file_count)
        yield from self._buffer[start:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Keep ``logs`` in memory until :meth:`flush`."""
        self._buffer.extend(logs)

    def flush(self) -> None:
        """Write the buffered logs with one lock and one fsync."""
        if self._buffer:
            pending, self._buffer = self._buffer, []
            self._file.append_logs(pending)
            self._file_count += len(pending)
