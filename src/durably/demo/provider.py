"""The simulated world the demo agents work in: a paid model provider that bills per call,
and the upstream services their tools call.

Token counts and latencies are derived from a hash of the request, so a run of the demo
is reproducible apart from timing. The provider bills a call when it answers; a call whose
caller dies first is never answered and never billed.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass

from durably.demo.ledger import Ledger, Origin

MODEL = "demo-model"
"""The simulated model's name, as its responses give it and the price table keys it."""
# What the provider charges, in millionths of a dollar per token ($3 / $15 per 1M).
INPUT_MICROS_PER_TOKEN = 3
OUTPUT_MICROS_PER_TOKEN = 15
STALL_POLL_SECONDS = 0.05


def _draw(*parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True, slots=True)
class Bill:
    """What one answered call used and cost, as the provider billed it."""

    input_tokens: int
    output_tokens: int
    cost_micros: int


class SimulatedProvider:
    """A paid model API: every answered call is billed in the ledger, by the provider."""

    def __init__(self, ledger: Ledger, *, latency: float = 0.25) -> None:
        self._ledger = ledger
        self._latency = latency

    async def complete(self, origin: Origin) -> Bill:
        """Answer one request after some latency and bill it.

        While the provider is stalled (the demo does that just before it kills a worker)
        the call waits, unanswered and unbilled.
        """
        draw = _draw(origin.tenant, origin.workflow, origin.step)
        input_tokens = 300 + draw % 1200
        output_tokens = 60 + (draw >> 16) % 340
        cost = input_tokens * INPUT_MICROS_PER_TOKEN + output_tokens * OUTPUT_MICROS_PER_TOKEN
        call = await self._ledger.start_call(origin, time.time())
        await asyncio.sleep(self._latency * (0.6 + (draw >> 32) % 100 / 100))
        while not await self._ledger.bill_call(
            call,
            now=time.time(),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_micros=cost,
        ):
            await asyncio.sleep(STALL_POLL_SECONDS)
        return Bill(input_tokens=input_tokens, output_tokens=output_tokens, cost_micros=cost)


class FlakyToolError(Exception):
    """A tool's upstream failed; trying again later helps."""


async def upstream(tool: str, argument: str) -> int:
    """Wait for a tool's simulated upstream; a number drawn from the request, for the
    tool to derive its answer from."""
    draw = _draw(tool, argument)
    await asyncio.sleep(0.03 + draw % 50 / 1000)
    return draw


__all__ = [
    "INPUT_MICROS_PER_TOKEN",
    "MODEL",
    "OUTPUT_MICROS_PER_TOKEN",
    "Bill",
    "FlakyToolError",
    "SimulatedProvider",
    "upstream",
]
