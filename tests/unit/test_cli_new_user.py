"""The CLI as a new user meets it: typos do not create databases, options read in any case,
and what it suggests works."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import durably
from durably import RunRecord, WorkItem
from durably.cli import build_parser, main
from durably.cli.demo import MISSING_EXTRA, command_name
from durably.engine.worker import start_workflow
from durably.stores import QueuePolicy
from durably.stores.opening import open_stores
from durably.stores.status import WorkflowStatus

INSPECTIONS = [
    ("runs", "list", "--tenant", "acme"),
    ("runs", "show", "--tenant", "acme", "r1"),
    ("queue", "stats"),
    ("queue", "dead-letters", "--tenant", "acme"),
    ("queue", "requeue", "--tenant", "acme", "--all"),
    ("workflows", "list"),
    ("workflows", "show", "wf"),
    ("workflows", "delete", "wf"),
    ("sweep", "--older-than", "7d"),
]


@pytest.mark.parametrize("argv", INSPECTIONS, ids=lambda argv: " ".join(argv[:2]))
def test_inspecting_a_sqlite_file_that_does_not_exist_refuses_instead_of_creating_it(
    tmp_path: Path, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo.db"
    assert main([*argv, "--dsn", f"sqlite:///{typo}"]) == 1
    _, err = capsys.readouterr()
    assert "no such database" in err
    assert str(typo) in err
    assert not typo.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("level", ["info", "Info", "INFO", "debug", "warning", "error"])
def test_the_worker_log_level_is_read_in_any_case(level: str) -> None:
    args = build_parser().parse_args(["worker", "jobs:setup", "--log-level", level])
    assert args.log_level == level.upper()


def test_the_demo_suggests_a_command_that_runs_from_the_readers_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    program = venv_bin / "durably"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/durably", "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the venv is not activated
    assert command_name() == ".venv/bin/durably"
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")  # it is
    assert command_name() == "durably"
    monkeypatch.setattr(sys, "argv", ["/somewhere/durably/__main__.py", "demo"])
    assert command_name().endswith(" -m durably")


async def _seed_tenants(path: Path) -> None:
    stores = await open_stores(f"sqlite:///{path}", policy=QueuePolicy(max_attempts=1))
    try:
        for tenant, count in (("globex", 2), ("acme", 2), ("zeta", 1)):
            for n in range(count):
                await stores.state.put_run(
                    RunRecord(run_id=f"{tenant}-{n}", tenant=tenant, agent_name="a")
                )
        for tenant in ("globex", "acme"):
            await stores.queue.enqueue(WorkItem(id=f"{tenant}-job", tenant=tenant, queue="mail"))
            held = await stores.queue.claim(worker="w", queue="mail")
            assert held is not None
            await stores.queue.fail(held.id, tenant=tenant, worker="w", error="no")
    finally:
        await stores.close()


def test_runs_list_and_dead_letters_show_every_tenant_when_none_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    asyncio.run(_seed_tenants(path))
    dsn = f"sqlite:///{path}"
    assert main(["runs", "list", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    order = ["acme-0", "acme-1", "globex-0", "globex-1", "zeta-0"]
    assert [out.index(run) for run in order] == sorted(out.index(run) for run in order)
    assert "tenant" in out.splitlines()[0]
    assert main(["runs", "list", "--dsn", dsn, "--limit", "3", "--json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in page["runs"]] == order[:3]
    assert page["more"] is True
    assert main(["runs", "list", "--dsn", dsn, "--limit", "2", "--all", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)["runs"]] == order
    assert main(["runs", "list", "--dsn", dsn, "--tenant", "zeta", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["zeta-0"]
    assert main(["queue", "dead-letters", "--dsn", dsn, "--json"]) == 0
    dead = json.loads(capsys.readouterr().out)["dead_letters"]
    assert [(d["tenant"], d["id"]) for d in dead] == [
        ("globex", "globex-job"),
        ("acme", "acme-job"),
    ]


async def _seed_workflows(path: Path) -> None:
    app = durably.App(f"sqlite:///{path}")

    @app.workflow(name="triage")
    async def triage(ctx: durably.Context, n: int) -> int:
        return n

    await triage.start(1, id="app-wf")
    await app.close()
    stores = await open_stores(f"sqlite:///{path}")
    try:
        await start_workflow(stores.durable("greeter"), "engine-wf", {"name": "Ada"})
        holder = await stores.checkpointer.claim("ran-wf", 5.0, 5.0)
        assert holder is not None
        await stores.checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    finally:
        await stores.close()


async def _ready(path: Path, kind: str) -> str | None:
    stores = await open_stores(f"sqlite:///{path}")
    try:
        delivery = await stores.durable(kind).scheduler.next_ready(0)
        return None if delivery is None else delivery.workflow
    finally:
        await stores.close()


def test_workflows_list_shows_kinds_and_workflows_no_worker_ran_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wf.db"
    asyncio.run(_seed_workflows(path))
    dsn = f"sqlite:///{path}"
    assert main(["workflows", "list", "--store-order", "--dsn", dsn, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["workflows"]
    assert [(w["workflow"], w["kind"], w["status"]["status"]) for w in listed] == [
        ("app-wf", "triage", "pending"),
        ("engine-wf", None, "pending"),
        ("ran-wf", None, "completed"),
    ]
    assert main(["workflows", "list", "--store-order", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "kind" in out.splitlines()[0]
    assert "pending (never run)" in out
    assert (
        main(["workflows", "list", "--store-order", "--dsn", dsn, "--status", "pending", "--json"])
        == 0
    )
    pending = [w["workflow"] for w in json.loads(capsys.readouterr().out)["workflows"]]
    assert pending == ["app-wf", "engine-wf"]
    assert main(["workflows", "show", "--dsn", dsn, "app-wf"]) == 0
    assert "kind      triage" in capsys.readouterr().out


def test_workflows_delete_finds_the_kind_and_refuses_to_guess_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wf.db"
    asyncio.run(_seed_workflows(path))
    dsn = f"sqlite:///{path}"
    assert main(["workflows", "delete", "--dsn", dsn, "no-such-wf"]) == 1
    assert "no workflow 'no-such-wf'" in capsys.readouterr().err
    assert asyncio.run(_ready(path, "triage")) == "app-wf"
    assert main(["workflows", "delete", "--dsn", dsn, "app-wf"]) == 0
    assert "of kind 'triage'" in capsys.readouterr().out
    assert asyncio.run(_ready(path, "triage")) is None  # its wakeup went with it
    with pytest.raises(SystemExit) as refused:
        main(["workflows", "delete", "--dsn", dsn, "engine-wf"])
    assert refused.value.code == 2
    assert "pass --kind" in capsys.readouterr().err
    assert main(["workflows", "delete", "--dsn", dsn, "engine-wf", "--kind", "greeter"]) == 0
    assert asyncio.run(_ready(path, "greeter")) is None


def test_an_app_on_a_relative_sqlite_path_names_the_absolute_file_and_says_it_made_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO)
    absolute = str(tmp_path / "app.db")

    async def open_twice() -> None:
        for _ in range(2):
            async with durably.App("sqlite:///app.db"):
                pass

    asyncio.run(open_twice())
    created = [r for r in caplog.records if "created a new, empty SQLite database" in r.message]
    assert [(r.levelname, absolute in r.message) for r in created] == [("WARNING", True)]
    opened = [r.message for r in caplog.records if r.message.startswith("opened ")]
    assert opened == [f"opened sqlite {absolute}"] * 2


def test_workflows_show_prints_the_apps_instants_as_utc_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    start = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    clock = durably.ManualClock(start)

    async def record() -> str:
        app = durably.App(dsn, clock=clock)

        @app.step(name="flaky", retry=durably.Retry(max_attempts=2, initial=60, maximum=60))
        async def flaky() -> int:
            if durably.context().attempt == 1:
                raise RuntimeError("try again")
            return 1

        @app.workflow(name="waits")
        async def waits(ctx: durably.Context) -> None:
            await ctx.now()
            await ctx.sleep(3600)
            await ctx.recv(durably.Topic("go", bool), timeout=60)
            await flaky()

        async with app:
            handle = await waits.options(id="wf-1", timeout=86_400).start()
            await app.run_until_idle()
            return handle.id

    workflow = asyncio.run(record())
    assert main(["workflows", "show", workflow, "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[2]: line.split()[3] for line in out.splitlines()[7:] if line.strip()}
    assert rows["durably:start"].startswith('{"args":{},"created":"2026-01-01T00:00:00.000Z"')
    assert rows["durably:now#1"] == "2026-01-01T00:00:00.000Z"
    assert rows["durably:sleep#1"] == "2026-01-01T01:00:00.000Z"
    assert rows["durably:recv:go#1:deadline"] == "2026-01-01T01:01:00.000Z"
    assert rows["flaky#1:retry#1"].startswith("2026-01-01T01:01:")  # its backoff is jittered
    assert str(int(start)) not in out


def test_the_demo_without_pydantic_ai_says_to_install_the_extra_in_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "demo.db"
    blocked = (
        "import sys; sys.modules['pydantic_ai'] = None; from durably.cli import main; "
        f"sys.exit(main(['demo', '--db', {str(path)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [MISSING_EXTRA]
    assert "pip install 'durably[pydantic-ai]'" in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_demo_exits_1_and_names_each_paid_step_that_ran_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from durably.demo import scenario

    repeated = "acme/b1-research research-agent.model[model-2] x2"
    report = scenario.Report(
        path=str(tmp_path / "demo.db"),
        batch=1,
        earlier_batches=0,
        killed_pid=1,
        billed_before_kill=1,
        in_flight_at_kill=0,
        repeated_paid_steps=[repeated],
        records_differing_from_bill=["acme/b1-research"],
    )

    async def told(self: scenario.Demo) -> scenario.Report:
        return report

    monkeypatch.setattr(scenario.Demo, "run", told)
    assert main(["demo", "--db", str(tmp_path / "demo.db")]) == 1
    out = capsys.readouterr().out
    assert f"PAID STEP RAN TWICE: {repeated}" in out
    assert "No paid step ran twice." not in out
    assert "RUN RECORDS DIFFER FROM THE BILL: acme/b1-research" in out
    assert main(["demo", "--db", str(tmp_path / "demo.db"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["no_paid_step_ran_twice"] is False
