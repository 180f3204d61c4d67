"""How one claim+complete and one `stats()` grow with the queue: the scale table.

For each backing, a queue is filled (in bulk) to each size, then one caller times
``SAMPLES`` claim+complete pairs and ``STATS_SAMPLES`` `stats()` calls; the median is
printed beside the same median at the smallest size (x smallest) and beside a floor's
claim+complete over a store filled to the same size (x floor). Sizes: items of one
tenant (1k, 100k; 1M on PostgreSQL) and tenants of a 20,000-item queue (1, 100, 1,000,
10,000). Each size runs ``ROUNDS`` times on a fresh store; every figure is the median of the
rounds, and the rounds go through an axis's sizes in turn (1k, 100k, 1k, 100k, ...), so a
change in the machine's load shifts every size alike. ``DURABLY_BENCH_SCALE_ROUNDS=N`` sets
the rounds. ``DURABLY_BENCH_SCALE=full`` adds 1M items on PostgreSQL (a minute or more to fill)
and runs three rounds instead of one (as for docs/performance.md's scale table), which
takes some 30 minutes on a busy two-core machine.

Run with ``python -m benchmarks.scale [memory|sqlite|postgres|redis ...]`` (or ``make bench``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from durably.stores.work import WorkQueue

FULL = os.environ.get("DURABLY_BENCH_SCALE", "") == "full"
SAMPLES = 150
STATS_SAMPLES = 15
ROUNDS = int(os.environ.get("DURABLY_BENCH_SCALE_ROUNDS", "3" if FULL else "1"))
TENANT_ITEMS = 20_000
ITEM_SIZES: tuple[int, ...] = (1_000, 100_000)
BIG_ITEMS = 1_000_000  # PostgreSQL only, with DURABLY_BENCH_SCALE=full
TENANT_SIZES: tuple[int, ...] = (1, 100, 1_000, 10_000)


def item_sizes(big: bool) -> list[tuple[str, int, int]]:
    """(label, items, tenants) for the items axis."""
    sizes = list(ITEM_SIZES) + ([BIG_ITEMS] if big and FULL else [])
    return [(f"{n:,} items, 1 tenant", n, 1) for n in sizes]


def tenant_sizes() -> list[tuple[str, int, int]]:
    """(label, items, tenants) for the tenants axis."""
    return [(f"{t:,} tenants, {TENANT_ITEMS:,} items", TENANT_ITEMS, t) for t in TENANT_SIZES]


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000.0


Row = tuple[str, float, float, float, float]  # label, durably, floor, stats, slowest (ms)
Sample = tuple[float, float, float, float]  # durably, floor, stats, slowest (ms)


async def timed(
    queue: WorkQueue,
    floor_claim: Callable[[], Awaitable[object]],
    floor_complete: Callable[[object], Awaitable[object]],
    warm: int = 0,
) -> tuple[float, float, float, float]:
    """Median ms of ``SAMPLES`` claim+complete pairs of ``queue`` and of the floor
    (alternating), of ``STATS_SAMPLES`` `stats()` calls, and the slowest durably pair; the
    first ``warm`` pairs untimed."""
    ours: list[float] = []
    floor: list[float] = []
    for n in range(warm + SAMPLES):
        began = time.perf_counter()
        item = await queue.claim(worker="w")
        assert item is not None
        await queue.complete(item.id, tenant=item.tenant, worker="w")
        middle = time.perf_counter()
        job = await floor_claim()
        assert job is not None
        await floor_complete(job)
        if n >= warm:
            ours.append(middle - began)
            floor.append(time.perf_counter() - middle)
    stats: list[float] = []
    for _ in range(STATS_SAMPLES):
        began = time.perf_counter()
        await queue.stats()
        stats.append(time.perf_counter() - began)
    return median_ms(ours), median_ms(floor), median_ms(stats), max(ours) * 1000.0


def print_table(backing: str, axes: Sequence[Sequence[Row]]) -> None:
    """Each axis's rows as ratios to its first row and to the floor at the same size."""
    print(f"{backing}: median of {ROUNDS} rounds, each the median of {SAMPLES} claim+complete")
    header = (
        f"{'size':32} {'claim+complete ms':>17} {'x smallest':>10} {'floor ms':>9} "
        f"{'x floor':>8} {'stats ms':>9} {'slowest ms':>10}"
    )
    print(header)
    for rows in axes:
        base = rows[0][1]
        for label, ours, floor, stats, slowest in rows:
            print(
                f"{label:32} {ours:17.3f} {ours / base:10.2f} {floor:9.3f} "
                f"{ours / floor:8.2f} {stats:9.3f} {slowest:10.3f}",
                flush=True,
            )


def run(measure: Callable[[int, int], Sample], big: bool = False) -> list[list[Row]]:
    """Every size's medians over ``ROUNDS`` rounds of ``measure(items, tenants)``, each round
    measuring every size of an axis in turn (the slowest column: the worst round's)."""
    axes: list[list[Row]] = []
    for sizes in (item_sizes(big), tenant_sizes()):
        rounds: list[list[Sample]] = [[] for _ in sizes]
        for _ in range(ROUNDS):
            for samples, (label, items, tenants) in zip(rounds, sizes, strict=True):
                samples.append(measure(items, tenants))
                print(f"  ({label}: {samples[-1][0]:.3f} ms)", flush=True)
        rows: list[Row] = []
        for samples, (label, _, _) in zip(rounds, sizes, strict=True):
            ours, floor, stats = (statistics.median(r[i] for r in samples) for i in range(3))
            rows.append((label, ours, floor, stats, max(r[3] for r in samples)))
        axes.append(rows)
    return axes


def main(argv: Sequence[str] = ()) -> None:
    """The scale table of each named backing (all by default)."""
    import importlib

    for name in argv or ("memory", "sqlite", "postgres", "redis"):
        module = importlib.import_module(f"benchmarks.scale_{name}")
        print_table(name, module.table())


if __name__ == "__main__":
    main(sys.argv[1:])
