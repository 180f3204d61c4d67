"""What a message send costs after 10,000 messages queued to the same workflow, on SQLite,
PostgreSQL and Redis: the promise is a send costing the same (at most 1.5x) to a long
inbox as to an empty one.

One workflow that never runs is sent ``QUEUED`` messages (``FILLED_AT_ONCE`` in flight at
a time, untimed). Then rounds alternate between ``SAMPLED`` sends to that inbox and as
many to a fresh workflow's, so both are timed under the same load on a shared machine;
each round's median wall time counts, and the figure is the median of the rounds. The
ratio is the one to read.

Run with ``python -m benchmarks.messages [sqlite postgres redis]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from benchmarks.app import dsn_for
from durably import App, Context, WorkflowHandle
from durably.testing.app.fixtures import NOTE
from durably.testing.app.messages import FILLED_AT_ONCE, send_many

QUEUED = 10_000
SAMPLED = 50
ROUNDS = 8
PROMISED = 1.5
BACKINGS = ("sqlite", "postgres", "redis")


async def _round(handle: WorkflowHandle[str | None]) -> float:
    """The median wall seconds of ``SAMPLED`` sends to ``handle``, one after another."""
    spent = []
    for _ in range(SAMPLED):
        began = time.perf_counter()
        await handle.send(NOTE, "x")
        spent.append(time.perf_counter() - began)
    return statistics.median(spent)


async def measure(dsn: str) -> tuple[float, float, float]:
    """Seconds to fill one inbox with ``QUEUED`` messages, then the median send to it and
    to a fresh workflow's inbox."""
    app = App(dsn)
    try:

        @app.workflow(name="bench-inbox")
        async def inbox(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        full = await inbox.start()  # never run: every message stays queued
        began = time.perf_counter()
        await send_many(full, QUEUED)
        filled = time.perf_counter() - began
        long_rounds, fresh_rounds = [], []
        for n in range(ROUNDS):
            fresh = await inbox.start()
            # Alternate which goes first, so neither side always follows the other.
            if n % 2:
                fresh_rounds.append(await _round(fresh))
                long_rounds.append(await _round(full))
            else:
                long_rounds.append(await _round(full))
                fresh_rounds.append(await _round(fresh))
        return filled, statistics.median(long_rounds), statistics.median(fresh_rounds)
    finally:
        await app.close()


async def run(backings: list[str]) -> None:
    print(
        f"send to an inbox of {QUEUED:,} messages vs a fresh one "
        f"(median of {ROUNDS} alternating rounds of {SAMPLED}; filled {FILLED_AT_ONCE} at once)"
    )
    print(f"{'backing':10} {'fill':>8} {'long':>10} {'fresh':>10} {'ratio':>7}  promise")
    for backing in backings:
        async with dsn_for(backing) as dsn:
            if dsn is None:
                print(f"{backing}: unreachable; skipped")
                continue
            filled, long_send, fresh_send = await measure(dsn)
        ratio = long_send / fresh_send
        verdict = "kept" if ratio <= PROMISED else "BROKEN"
        print(
            f"{backing:10} {filled:7.1f}s {long_send * 1e3:8.3f}ms {fresh_send * 1e3:8.3f}ms "
            f"{ratio:6.2f}x  <= {PROMISED}x {verdict}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    """Print the send-cost row of each backing named (all by default)."""
    asyncio.run(run(list(argv or []) or list(BACKINGS)))


if __name__ == "__main__":
    main(sys.argv[1:])
