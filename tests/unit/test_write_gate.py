"""`WriteGate`: at most its slots of writes in flight, and a write refused by an exhausted
pool tried again (never anything else) until its patience runs out."""

from __future__ import annotations

import asyncio
import time

import pytest

from durably.errors import PoolExhaustedError, StatePersistenceError
from durably.stores.pacing import WriteGate


async def test_no_more_writes_than_slots_are_in_flight_at_once() -> None:
    gate = WriteGate(3)
    in_flight = 0
    most = 0

    async def write(n: int) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return n

    results = await asyncio.gather(*(gate.write(1.0, write, n) for n in range(200)))
    assert results == list(range(200))
    assert most == 3


async def test_a_write_the_pool_refused_is_tried_again_until_it_lands() -> None:
    gate = WriteGate(1)
    tries: list[float] = []

    async def write() -> str:
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise PoolExhaustedError("postgres", 1)
        return "landed"

    assert await gate.write(30.0, write) == "landed"
    assert len(tries) == 3
    assert tries[1] - tries[0] >= 0.02  # paused between tries (jittered half of 50 ms)


async def test_a_pool_that_stays_exhausted_is_raised_once_patience_runs_out() -> None:
    gate = WriteGate(1)
    tries = 0

    async def write() -> None:
        nonlocal tries
        tries += 1
        raise PoolExhaustedError("redis", 2)

    started = time.monotonic()
    with pytest.raises(PoolExhaustedError):
        await gate.write(0.5, write)
    waited = time.monotonic() - started
    assert 0.2 <= waited <= 1.5
    assert 2 <= tries <= 12  # doubling pauses, not a spin


async def test_any_other_failure_is_raised_at_once_without_another_try() -> None:
    gate = WriteGate(1)
    tries = 0

    async def write() -> None:
        nonlocal tries
        tries += 1
        raise StatePersistenceError("postgres", "unavailable", "gone")

    with pytest.raises(StatePersistenceError):
        await gate.write(30.0, write)
    assert tries == 1


async def test_a_cancelled_writer_gives_its_slot_back() -> None:
    gate = WriteGate(1)
    started = asyncio.Event()

    async def stuck() -> None:
        started.set()
        await asyncio.Event().wait()

    async def quick() -> str:
        return "next"

    holder = asyncio.create_task(gate.write(1.0, stuck))
    await started.wait()
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    assert await asyncio.wait_for(gate.write(1.0, quick), timeout=5) == "next"


def test_a_gate_needs_at_least_one_slot() -> None:
    with pytest.raises(ValueError, match="slots"):
        WriteGate(0)
