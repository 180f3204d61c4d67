"""``durably workflows resume``: a failed workflow runs again on the code deployed now, its
recorded steps answering from the record."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import durably
from durably.cli import main

FIXED = {"yes": False}
CALLS: list[str] = []


def build(dsn: str) -> tuple[durably.App, durably.Workflow[[], str]]:
    app = durably.App(dsn)

    @app.step(name="paid-call")
    async def paid_call() -> str:
        CALLS.append("paid")
        return "answer"

    @app.workflow(name="resumable")
    async def resumable(ctx: durably.Context) -> str:
        answer = await paid_call()
        if not FIXED["yes"]:
            raise RuntimeError("a bug after the paid call")
        return answer

    return app, resumable


async def _fail_once(dsn: str) -> None:
    app, resumable = build(dsn)
    async with app:
        await resumable.start(id="wf-1")
        await app.run_until_idle()
        assert (await (await resumable.get_handle("wf-1")).status()).status.value == "failed"


async def _finish(dsn: str) -> str:
    app, resumable = build(dsn)
    async with app:
        await app.run_until_idle()
        return await (await resumable.get_handle("wf-1")).result(timeout=10)


def test_resume_makes_a_failed_workflow_ready_and_it_finishes_on_the_fixed_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"sqlite:///{tmp_path / 'r.db'}"
    FIXED["yes"], CALLS[:] = False, []
    asyncio.run(_fail_once(dsn))
    FIXED["yes"] = True  # the fix is deployed
    assert main(["workflows", "resume", "wf-1", "--dsn", dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "tenant": "default",
        "workflow": "wf-1",
        "resumed": True,
        "status": "pending",
    }
    assert asyncio.run(_finish(dsn)) == "answer"
    assert CALLS == ["paid"]  # the recorded step answered from its record
    # A completed workflow is not resumed: exit 1, nothing changes.
    assert main(["workflows", "resume", "wf-1", "--dsn", dsn]) == 1
    assert "only a parked, failed or cancelled workflow" in capsys.readouterr().err


def test_resume_of_a_workflow_that_does_not_exist_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"sqlite:///{tmp_path / 'r.db'}"
    FIXED["yes"] = False
    asyncio.run(_fail_once(dsn))
    assert main(["workflows", "resume", "nope", "--dsn", dsn]) == 1
    assert "no workflow 'nope'" in capsys.readouterr().err
