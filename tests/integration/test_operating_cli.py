"""Every ``durably workflows`` operating command through a real subprocess: start, list
(filters, newest first), send, result, show --json (what handle.history() returns),
fork, cancel and resume by id and by filter (confirmation asked unless --yes), catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from durably import App, ManualClock
from tests.integration.ops_cli import opsflows

SRC = str(Path(__file__).resolve().parents[2] / "src")
HERE = str(Path(__file__).resolve().parent / "ops_cli")


def _cli(dsn: str, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "DURABLY_DSN": dsn}
    return subprocess.run(
        [sys.executable, "-m", "durably", "workflows", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        input=stdin,
        check=False,
    )


async def _serve(dsn: str) -> None:
    opsflows.app.dsn = dsn
    await opsflows.app.run_until_idle()
    await opsflows.app.close()


async def test_start_list_send_result_and_show_work_through_a_subprocess(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'cli.db'}"
    async with App(dsn, clock=ManualClock()) as app:
        await app.stores()  # the file exists
    started = _cli(
        dsn,
        "start",
        "opsflows:greet",
        "--args",
        '["ada"]',
        "--id",
        "g1",
        "--tenant",
        "acme",
        "--app-dir",
        HERE,
        "--json",
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"tenant": "acme", "workflow": "g1", "created": True}
    for n in (2, 3):
        again = _cli(
            dsn,
            "start",
            "opsflows:greet",
            "--args",
            '{"name": "bo"}',
            "--id",
            f"g{n}",
            "--tenant",
            "acme",
            "--app-dir",
            HERE,
        )
        assert again.returncode == 0, again.stderr
    await _serve(dsn)

    listed = _cli(dsn, "list", "--tenant", "acme", "--kind", "greet", "--limit", "2", "--json")
    assert listed.returncode == 0, listed.stderr
    page = json.loads(listed.stdout)
    assert [w["workflow"] for w in page["workflows"]] == ["g3", "g2"]
    assert page["workflows"][0]["status"] == "blocked"
    rest = _cli(dsn, "list", "--tenant", "acme", "--kind", "greet", "--after", page["next_after"])
    assert rest.returncode == 0
    assert "g1" in rest.stdout
    assert "g2" not in rest.stdout
    assert "Z" in rest.stdout  # readable UTC times
    foreign = _cli(dsn, "list", "--tenant", "globex", "--after", page["next_after"])
    assert foreign.returncode == 2
    assert "another filter or tenant" in foreign.stderr
    assert _cli(dsn, "list", "--status", "sleepy").returncode == 2

    sent = _cli(dsn, "send", "--tenant", "acme", "g1", "note", '"hi"')
    assert sent.returncode == 0, sent.stderr
    await _serve(dsn)
    result = _cli(dsn, "result", "--tenant", "acme", "g1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"result": "ADA hi"}

    shown = _cli(dsn, "show", "--tenant", "acme", "g1", "--json")
    assert shown.returncode == 0
    opsflows.app.dsn = dsn
    try:
        handle = await opsflows.app.get_handle("g1", tenant="acme")
        assert json.loads(shown.stdout) == json.loads(json.dumps(await handle.history()))
    finally:
        await opsflows.app.close()
    for output in (listed, rest, sent, result, shown):
        assert "Traceback" not in output.stdout + output.stderr


async def _seeded(dsn: str) -> None:
    """g1 completed, g2 and g3 waiting for a note, all of tenant acme (started in-process)."""
    opsflows.app.dsn = dsn
    try:
        for n, name in ((1, "ada"), (2, "bo"), (3, "cy")):
            await opsflows.greet.start(name, id=f"g{n}", tenant="acme")
        await opsflows.app.run_until_idle()
        await (await opsflows.app.get_handle("g1", tenant="acme")).send(opsflows.NOTE, "hi")
        await opsflows.app.run_until_idle()
    finally:
        await opsflows.app.close()


async def test_fork_cancel_resume_and_catalog_work_through_a_subprocess(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'cli.db'}"
    await _seeded(dsn)
    forked = _cli(
        dsn,
        "fork",
        "--tenant",
        "acme",
        "g1",
        "--from-step",
        "durably:recv:note#1",
        "--id",
        "g1-again",
        "--json",
    )
    assert forked.returncode == 0, forked.stderr
    assert json.loads(forked.stdout)["workflow"] == "g1-again"
    bad_fork = _cli(dsn, "fork", "--tenant", "acme", "g1", "--from-step", "nope#1")
    assert bad_fork.returncode == 2
    assert "from_step" in bad_fork.stderr

    cancelled = _cli(dsn, "cancel", "--tenant", "acme", "g2")
    assert cancelled.returncode == 0, cancelled.stderr
    refused = _cli(dsn, "cancel", "--kind", "greet")
    assert refused.returncode == 2  # crossing tenants must be asked for
    declined = _cli(dsn, "cancel", "--tenant", "acme", "--status", "blocked", stdin="n\n")
    assert declined.returncode == 1
    bulk = _cli(dsn, "cancel", "--tenant", "acme", "--status", "blocked", "--yes", "--json")
    assert bulk.returncode == 0, bulk.stderr
    assert {w["workflow"] for w in json.loads(bulk.stdout)["cancelled"]} == {"g3"}
    nothing = _cli(
        dsn, "cancel", "--all-tenants", "--kind", "greet", "--status", "sleeping", "--yes"
    )
    assert nothing.returncode == 2
    assert "no workflow matches" in nothing.stderr
    await _serve(dsn)

    resumed = _cli(dsn, "resume", "--tenant", "acme", "--status", "cancelled", "--yes", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert {w["workflow"] for w in json.loads(resumed.stdout)["resumed"]} == {"g2", "g3"}
    one = _cli(dsn, "resume", "--tenant", "acme", "g1")
    assert one.returncode == 1  # completed: nothing to resume
    catalogued = _cli(dsn, "catalog", "--json")
    assert catalogued.returncode == 0
    assert json.loads(catalogued.stdout)["catalogued"] == 4
    for output in (forked, cancelled, bulk, resumed):
        assert "Traceback" not in output.stdout + output.stderr


pytestmark = pytest.mark.timeout(120)
