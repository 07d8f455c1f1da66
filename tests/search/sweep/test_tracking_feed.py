"""Finished batches reach the tracking session in order even when it opens after them.

The sweep's MLflow session opens on a thread beside the Ray pool's start; evaluation does not
wait for it (``search.sweep.driver._TrackingFeed``): batches that finish first are kept and
passed on, in order, once the session is open; with no session (tracking off or unreachable)
they are dropped (they are on disk).
"""

from __future__ import annotations

from concurrent.futures import Future

import polars as pl

from search.sweep.driver import _TrackingFeed


class _Session:
    """The one method of a tracking session the feed calls."""

    def __init__(self) -> None:
        self.frames: list[int] = []

    def submit(self, frame: pl.DataFrame) -> None:
        self.frames.append(int(frame["batch"][0]))


def _frame(i: int) -> pl.DataFrame:
    return pl.DataFrame({"batch": [i]})


def test_batches_before_the_session_opens_wait_and_arrive_first_in_order() -> None:
    opening: Future[_Session] = Future()
    feed = _TrackingFeed(opening)
    for i in range(3):
        feed.submit(_frame(i))  # the session is not open yet: nothing blocks
    session = _Session()
    opening.set_result(session)
    assert session.frames == []  # passed on at the next batch, not from another thread
    feed.submit(_frame(3))
    feed.submit(_frame(4))
    feed.close()
    assert session.frames == [0, 1, 2, 3, 4]


def test_close_waits_for_the_session_and_flushes() -> None:
    opening: Future[_Session] = Future()
    feed = _TrackingFeed(opening)
    feed.submit(_frame(7))
    session = _Session()
    opening.set_result(session)
    feed.close()
    feed.close()  # idempotent
    assert session.frames == [7]


def test_without_a_session_frames_are_dropped() -> None:
    opening: Future[None] = Future()
    feed = _TrackingFeed(opening)
    feed.submit(_frame(1))
    opening.set_result(None)
    feed.submit(_frame(2))
    feed.close()
    assert feed._waiting == []
