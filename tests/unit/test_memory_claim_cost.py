"""The memory queue's claim does not grow with the queue: the same work per claim+complete
at 1,000 and 100,000 items, and at 1 and 10,000 tenants
(dev/decisions/019-claim-rotation-index.md).

Work is counted, not timed: the Python lines run and the items parsed per claim+complete
(a scan shows as lines or parses per item). Heap operations run in C and are not counted,
so a wall-time check with a wide margin stands beside the counts: medians of interleaved
rounds, so a busy machine slows both sizes alike."""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest

from durably.clock import SystemClock
from durably.memory import MemoryWorkQueue
from durably.memory import queue as memory_queue
from durably.stores.work import WorkItem, WorkPriority
from tests.line_count import lines_run

PAIRS = 200  # claim+complete pairs counted (and timed) on each queue
TIME_RATIO = 3.0  # a scan of every item would be some 100 times slower at the larger size
COUNT_RATIO = 1.25


async def _filled(items: int, tenants: int) -> MemoryWorkQueue:
    queue = MemoryWorkQueue(SystemClock())
    priorities = list(WorkPriority)
    for n in range(items):
        await queue.enqueue(
            WorkItem(
                tenant=f"t{n % tenants}",
                id=f"i{n}",
                payload={"n": str(n)},
                priority=priorities[n % len(priorities)],
            )
        )
    return queue


async def _pair(queue: MemoryWorkQueue) -> None:
    item = await queue.claim(worker="w")
    assert item is not None
    await queue.complete(item.id, tenant=item.tenant, worker="w")


async def _counted(queue: MemoryWorkQueue, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(Python lines run, items parsed) over ``PAIRS`` claim+complete pairs."""
    parses = 0
    parse = memory_queue._Slot.item

    def counted_parse(slot: Any) -> WorkItem:
        nonlocal parses
        parses += 1
        return parse(slot)

    with monkeypatch.context() as patched:
        patched.setattr(memory_queue._Slot, "item", counted_parse)
        with lines_run() as lines:
            for _ in range(PAIRS):
                await _pair(queue)
    return lines[0], parses


async def _timed(small: MemoryWorkQueue, large: MemoryWorkQueue) -> tuple[float, float]:
    """Median seconds of a claim+complete pair on each queue, in alternating rounds."""
    spans: tuple[list[float], list[float]] = ([], [])
    for _ in range(PAIRS):
        for queue, samples in zip((small, large), spans, strict=True):
            began = time.perf_counter()
            await _pair(queue)
            samples.append(time.perf_counter() - began)
    return statistics.median(spans[0]), statistics.median(spans[1])


async def _compare(
    small: MemoryWorkQueue, large: MemoryWorkQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_time, large_time = await _timed(small, large)
    small_lines, small_parses = await _counted(small, monkeypatch)
    large_lines, large_parses = await _counted(large, monkeypatch)
    assert large_parses == small_parses == 2 * PAIRS  # the claimed item, then the completed
    assert large_lines <= COUNT_RATIO * small_lines, (small_lines, large_lines)
    assert large_time <= TIME_RATIO * small_time, (small_time, large_time)


async def test_a_claim_costs_the_same_at_a_hundred_times_the_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _compare(await _filled(1_000, 1), await _filled(100_000, 1), monkeypatch)


async def test_a_claim_costs_the_same_at_ten_thousand_tenants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _compare(await _filled(20_000, 1), await _filled(20_000, 10_000), monkeypatch)
