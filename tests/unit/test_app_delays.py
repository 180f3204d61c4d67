"""Delayed starts refuse a bad ``delay=`` or ``at=`` by name before anything is stored, and
a body parameter named like either option at registration."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durably import App, Context
from durably.clock import ManualClock
from durably.errors import ConfigurationError, InvalidInputError, WorkflowNotFoundError


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"delay": -1}, "delay must"),
        ({"delay": float("nan")}, "delay must"),
        ({"delay": "soon"}, "delay must"),
        ({"at": datetime(2030, 1, 1)}, "at must be a timezone-aware"),  # naive
        ({"at": 1_900_000_000}, "at must be a datetime"),
        ({"delay": 5, "at": datetime(2030, 1, 1, tzinfo=UTC)}, "delay= or at="),
    ],
)
async def test_a_bad_delay_or_time_is_refused_by_name_before_anything_is_stored(
    options: dict[str, object], named: str
) -> None:
    async with App("memory://", clock=ManualClock()) as app:

        @app.workflow(name="refused")
        async def refused(ctx: Context) -> None:
            return None

        with pytest.raises(InvalidInputError, match=named):
            await refused.start(id="w-1", **options)  # type: ignore[call-overload]
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle("w-1")


@pytest.mark.parametrize("option", ["delay", "at"])
def test_a_body_parameter_named_like_a_delay_option_is_refused_at_registration(
    option: str,
) -> None:
    app = App("memory://")
    namespace: dict[str, object] = {"Context": Context}
    exec(  # a parameter named by the test
        f"async def clash(ctx: Context, {option}: int) -> None:\n    return None", namespace
    )
    with pytest.raises(ConfigurationError, match=rf"'{option}' collides"):
        app.workflow(name="clash")(namespace["clash"])  # type: ignore[arg-type]
