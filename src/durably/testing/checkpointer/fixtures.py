"""Helpers shared by the `CheckpointerConformance` cases."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from durably.stores.workflows import Checkpointer, Pass

CheckpointerFactory = Callable[[], Awaitable[Checkpointer[Any]]]

LONG = 30.0  # a budget or liveness window no test outlives

STRANGE_IDS = (
    "{braces}",
    "quo\"tes'",
    "semi;colon",
    "co:lon",
    "co:lon:",
    "100%",
    "with space",
    "emoji 🚀",
    "{a}:1:b",
    "%s%d",
)


def wf(label: str = "wf") -> str:
    """A workflow id no other test uses."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


async def claimed(cp: Checkpointer[Any], workflow: str, budget: float = LONG) -> Pass:
    holder = await cp.claim(workflow, budget, LONG if budget >= LONG else budget)
    assert holder is not None, f"{workflow} should have been free to claim"
    return holder


async def lapse(cp: Checkpointer[Any], workflow: str) -> Pass:
    """Claim ``workflow`` with a short liveness window and let it lapse."""
    holder = await cp.claim(workflow, LONG, 0.15)
    assert holder is not None
    await asyncio.sleep(0.25)
    return holder
