"""A workflow's ``cron=``, ``tz=``, ``debounce=`` and ``debounce_key=`` refuse bad values by
name at registration, and a debounced start refuses a bad key before anything is stored;
cron workflows are listed beside task schedules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durably import App, Context
from durably.cli import main
from durably.clock import ManualClock
from durably.errors import ConfigurationError, InvalidInputError, WorkflowNotFoundError


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * *"}, "cron must be a five-field"),
        ({"cron": 5}, "cron must be"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz"),
        ({"tz": "UTC"}, "tz applies to cron= only"),
        ({"debounce": 0}, "debounce must be positive"),
        ({"debounce": timedelta(seconds=-1)}, "debounce must be positive"),
        ({"debounce": float("inf")}, "debounce must be positive"),
        ({"debounce": "5m"}, "debounce must be seconds"),
        ({"debounce": 5, "debounce_key": "account"}, "debounce_key must be a callable"),
        ({"debounce_key": lambda: "k"}, "debounce_key needs debounce="),
        ({"debounce": 5, "timeout": 60}, "timeout= does not apply with debounce="),
    ],
)
def test_a_bad_schedule_or_debounce_option_is_refused_by_name(
    options: dict[str, Any], named: str
) -> None:
    app = App("memory://")
    with pytest.raises(InvalidInputError, match=named):

        @app.workflow(name="refused", **options)
        async def refused(ctx: Context) -> None:
            return None


def test_a_cron_workflow_takes_no_parameter_but_the_tick() -> None:
    app = App("memory://")
    with pytest.raises(ConfigurationError, match="one annotated datetime"):

        @app.workflow(name="refused", cron="* * * * *")
        async def refused(ctx: Context, n: int) -> None:
            return None

    app.schedule("taken", cron="* * * * *")
    with pytest.raises(ConfigurationError, match="registered already"):

        @app.workflow(name="taken", cron="0 * * * *")
        async def taken(ctx: Context, tick: datetime) -> None:
            return None


async def test_app_schedule_takes_a_registered_workflow_or_task() -> None:
    clock = ManualClock(datetime(2027, 3, 1, 9, 0, 30, tzinfo=UTC).timestamp())
    ran: list[str] = []
    async with App("memory://", clock=clock) as app:

        @app.workflow(name="report")
        async def report(ctx: Context, tick: datetime) -> None:
            ran.append(f"workflow {ctx.id}")

        @app.task(name="sweep")
        async def sweep(tick: datetime) -> None:
            ran.append(f"task {tick.isoformat()}")

        assert app.schedule(report, cron="* * * * *").workflow == "report"
        assert app.schedule(sweep, cron="* * * * *").queue == sweep.queue
        with pytest.raises(ConfigurationError, match="registered already"):
            app.schedule(report, cron="0 * * * *")
        with pytest.raises(InvalidInputError, match="name must be a string"):
            app.schedule(7, cron="0 * * * *")  # type: ignore[arg-type]
        await app.run_until_idle(advance=False)  # the marks
        clock.advance(60)
        await app.run_until_idle(advance=False)
    assert sorted(ran) == [
        "task 2027-03-01T09:01:00+00:00",
        "workflow report@2027-03-01T09:01:00+00:00",
    ]


@pytest.mark.parametrize(
    ("key", "named"),
    [
        (lambda n: n, "debounce_key must return a string, got int"),
        (lambda n: "", "debounce_key must not be empty"),
        (lambda n: "x" * 600, "debounce_key must be at most"),
        (lambda n: 1 / 0, "debounce_key failed"),
    ],
)
async def test_a_bad_debounce_key_is_refused_before_anything_is_stored(
    key: Any, named: str
) -> None:
    async with App("memory://", clock=ManualClock()) as app:

        @app.workflow(name="keyed", debounce=60, debounce_key=key)
        async def keyed(ctx: Context, n: int) -> None:
            return None

        with pytest.raises(InvalidInputError, match=named):
            await keyed.start(1, id="w-1")
        with pytest.raises(InvalidInputError, match="no delay=, at= or timeout="):
            await keyed.start(1, id="w-1", delay=5)
        with pytest.raises(InvalidInputError, match="no delay=, at= or timeout="):
            await keyed.start(1, id="w-1", timeout=5)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle("w-1")


MODULE = """
from datetime import datetime
from durably import App, Context

app = App("memory://")

@app.task(cron="*/15 * * * *")
async def sweep() -> None: ...

@app.workflow(name="report", cron="30 6 * * *", tz="Europe/Berlin")
async def report(ctx: Context, tick: datetime) -> None: ...
"""


def test_cron_workflows_are_listed_beside_task_schedules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "wfcronjobs.py").write_text(MODULE)
    assert main(["schedules", "list", "wfcronjobs:app", "--app-dir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(row["name"], row["queue"], row["workflow"], row["tenant"]) for row in listed] == [
        ("wfcronjobs.sweep", "default", None, "default"),
        ("report", None, "report", "default"),
    ]
