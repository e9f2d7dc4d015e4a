from __future__ import annotations

import itertools
import threading
import time

import pytest

from console.lifecycle.logs import TRUNCATED_MARK, LogBuffer, LogUpdate


def test_ring_keeps_newest_lines_with_absolute_indices() -> None:
    buf = LogBuffer(capacity=5)
    buf.extend(f"line {i}" for i in range(12))
    assert len(buf) == 5
    assert (buf.start, buf.end) == (7, 12)
    assert [ln.text for ln in buf.lines()] == [f"line {i}" for i in range(7, 12)]
    assert buf.get(6) is None
    got = buf.get(9)
    assert got is not None and got.text == "line 9" and got.index == 9
    assert [ln.index for ln in buf.tail(2)] == [10, 11]
    assert [ln.index for ln in buf.lines(5, 9)] == [7, 8]


def test_long_lines_are_capped_and_marked() -> None:
    buf = LogBuffer(max_line=4096)
    buf.append("x" * 10_000)
    line = buf.lines()[0]
    assert line.truncated
    assert line.text == "x" * 4096 + TRUNCATED_MARK
    buf.append("short\r\n")
    assert buf.lines()[-1].text == "short" and not buf.lines()[-1].truncated


def test_feed_splits_chunks_and_keeps_partial_lines() -> None:
    buf = LogBuffer()
    buf.feed("alpha\nbe")
    assert [ln.text for ln in buf.lines()] == ["alpha"]
    buf.feed("ta\ngamma")
    assert [ln.text for ln in buf.lines()] == ["alpha", "beta"]
    buf.flush_partial()
    assert buf.last_text() == "gamma"


def test_search_substring_regex_and_bad_regex() -> None:
    buf = LogBuffer(capacity=100)
    buf.extend(["INFO start", "WARNING low memory", "info loaded 50%", "ERROR CUDA OOM"])
    assert buf.search("info") == [0, 2]
    assert buf.search("info", ignore_case=False) == [2]
    assert buf.search(r"\d+%", regex=True) == [2]
    assert buf.search(r"^(WARNING|ERROR)", regex=True) == [1, 3]
    with pytest.raises(ValueError, match="invalid regular expression"):
        buf.search("(", regex=True)


def test_follow_and_unfollow_window() -> None:
    buf = LogBuffer(capacity=100)
    buf.extend(str(i) for i in range(20))
    assert [ln.text for ln in buf.window(3)] == ["17", "18", "19"]
    buf.unfollow()
    assert not buf.following
    frozen = [ln.text for ln in buf.window(3)]
    buf.extend(["20", "21"])
    assert [ln.text for ln in buf.window(3)] == frozen  # the view stays put while new lines arrive
    buf.follow()
    assert [ln.text for ln in buf.window(3)] == ["19", "20", "21"]
    buf.unfollow(anchor=5)
    assert [ln.text for ln in buf.window(2)] == ["5", "6"]


def test_notifications_are_coalesced_to_max_rate() -> None:
    buf = LogBuffer(capacity=10_000, max_rate=10.0)
    updates: list[LogUpdate] = []
    done = threading.Event()

    def listener(u: LogUpdate) -> None:
        updates.append(u)
        if u.end == 20_000:
            done.set()

    buf.subscribe(listener)
    t0 = time.monotonic()
    for i in range(200):  # 20,000 lines in 100 batches over about 0.5 s
        buf.extend(f"line {i}-{j}" for j in range(100))
        time.sleep(0.0025)
    elapsed = time.monotonic() - t0
    assert done.wait(2.0), "the final lines were never announced"
    # At most one notice per 100 ms (plus the first one at once), however many appends.
    assert len(updates) <= elapsed / 0.1 + 3
    assert len(updates) >= 2
    # Every line is covered exactly once by the notices, and lines that fell out are counted.
    assert updates[0].first_new == 0
    for a, b in itertools.pairwise(updates):
        assert b.first_new == a.end
    assert sum(u.dropped for u in updates) == 10_000
    assert len(buf) == 10_000


def test_unsubscribe_and_broken_listener() -> None:
    buf = LogBuffer(max_rate=0)
    seen: list[int] = []

    def bad(u: LogUpdate) -> None:
        raise RuntimeError("view crashed")

    buf.subscribe(bad)
    unsub = buf.subscribe(lambda u: seen.append(u.end))
    buf.append("a")
    unsub()
    buf.append("b")
    assert seen == [1]
    assert buf.end == 2


def test_concurrent_appends_lose_nothing() -> None:
    buf = LogBuffer(capacity=100_000)

    def writer(k: int) -> None:
        for i in range(2000):
            buf.append(f"{k}:{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert buf.end == 8000
    assert len({ln.text for ln in buf.lines()}) == 8000
