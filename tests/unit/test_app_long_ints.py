"""An int longer than any reader parses (more than `MAX_INT_DIGITS` digits): refused as a
workflow's or a step's argument with a typed `InvalidInputError` before any I/O, and as a
step's result with a `StepResultError`; the longest that reads is taken."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

import durably.app._core as core_module
from durably.app import App, Context
from durably.errors import InvalidInputError, StepFailedError
from durably.validation import INT_BOUND

LONG = 10**5_000
"""A 5,001-digit int."""


def _app_without_io(monkeypatch: pytest.MonkeyPatch) -> App:
    async def no_io(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stores were opened: the refusal came after I/O")

    monkeypatch.setattr(core_module, "open_stores", no_io)
    return App("memory://")


@pytest.mark.parametrize(
    "arguments",
    [
        (LONG, [1], {}),
        (-LONG, [1], {}),
        (1, [2, LONG], {}),
        (1, [2], {"deep": [{"x": LONG}]}),
    ],
    ids=["an int", "a negative int", "in a list", "deep in an object"],
)
async def test_a_long_int_argument_is_refused_before_any_io(
    monkeypatch: pytest.MonkeyPatch, arguments: tuple[Any, ...]
) -> None:
    app = _app_without_io(monkeypatch)

    @app.workflow(name="takes-ints")
    async def takes(ctx: Context, n: int, many: list[int], anything: dict[str, JsonValue]) -> int:
        return n

    with pytest.raises(InvalidInputError, match="digits") as raised:
        await takes.start(*arguments)
    assert "takes-ints" in str(raised.value)
    assert type(raised.value) is InvalidInputError  # not a raw ValueError


async def test_the_longest_int_a_reader_parses_round_trips() -> None:
    app = App("memory://")

    @app.workflow(name="longest")
    async def longest(ctx: Context, n: int) -> int:
        return n

    handle = await longest.start(INT_BOUND - 1)
    await app.run_until_idle()
    assert await handle.result(timeout=5) == INT_BOUND - 1
    await app.close()


async def test_a_long_int_as_a_step_argument_or_result_fails_the_step_typed() -> None:
    app = App("memory://")
    ran: list[str] = []

    @app.step(name="echo")
    async def echo(n: int) -> int:
        ran.append("echo")
        return n

    @app.step(name="grow")
    async def grow() -> int:
        ran.append("grow")
        return LONG

    @app.workflow(name="steps")
    async def steps(ctx: Context) -> list[str]:
        caught = []
        try:
            await echo(LONG)
        except InvalidInputError as exc:
            caught.append(type(exc).__name__)
        try:
            await grow()
        except StepFailedError as exc:
            caught.append(type(exc).__name__)
        return caught

    handle = await steps.start()
    await app.run_until_idle()
    assert await handle.result(timeout=5) == ["InvalidInputError", "StepFailedError"]
    assert ran == ["grow"]  # refused before the call; the result after it, recorded
    await app.close()
