"""The ``durably`` command line over real SQLite files: tables, JSON, exit codes, and
errors that never show a traceback or a DSN."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from durably import RunRecord, RunState, Usage, WorkItem
from durably.cli import main
from durably.engine.worker import start_workflow
from durably.stores import QueuePolicy
from durably.stores.dsn import describe, scrub
from durably.stores.opening import open_stores
from durably.stores.status import WorkflowStatus

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refusing arguments
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def dsn(path: Path) -> str:
    return f"sqlite:///{path}"


async def _seed(path: Path) -> None:
    stores = await open_stores(dsn(path), policy=QueuePolicy(max_attempts=1))
    try:
        for i in range(3):
            await stores.state.put_run(
                RunRecord(run_id=f"run {i} 🙂", tenant="acme", agent_name="helper")
            )
        await stores.state.put_run(RunRecord(run_id="other", tenant="globex", agent_name="x"))
        await stores.queue.enqueue(WorkItem(id="job:1", tenant="acme", queue="mail"))
        claimed = await stores.queue.claim(worker="w", queue="mail")
        assert claimed is not None
        await stores.queue.fail("job:1", tenant="acme", worker="w", error="SMTP said no")
        durable = stores.durable("greeter")
        await start_workflow(durable, "wf {1}", {"name": "Ada"})
    finally:
        await stores.close()


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    asyncio.run(_seed(path))
    return path


def test_runs_list_prints_a_tenants_runs_in_creation_order(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "runs", "list", "--dsn", dsn(seeded), "--tenant", "acme")
    assert code == 0
    assert out.index("run 0 🙂") < out.index("run 1 🙂") < out.index("run 2 🙂")
    assert "other" not in out


def test_runs_list_pages_with_all_and_reports_json(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("runs", "list", "--dsn", dsn(seeded), "--tenant", "acme", "--limit", "2")
    code, out, _ = run_cli(capsys, *argv, "--json")
    page = json.loads(out)
    assert code == 0
    assert len(page["runs"]) == 2
    assert page["cursor"]
    code, out, _ = run_cli(capsys, *argv, "--all", "--json")
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["run 0 🙂", "run 1 🙂", "run 2 🙂"]


def test_runs_show_prints_one_record_and_fails_for_a_missing_one(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        capsys, "runs", "show", "--dsn", dsn(seeded), "--tenant", "acme", "run 1 🙂", "--json"
    )
    assert code == 0
    assert json.loads(out)["state"] == RunState.PENDING.value
    code, out, err = run_cli(
        capsys, "runs", "show", "--dsn", dsn(seeded), "--tenant", "globex", "run 1 🙂"
    )
    assert code == 1
    assert "no run" in err
    assert "Traceback" not in out + err


def test_runs_show_prints_every_usage_field_of_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "usage.db"
    usage = Usage(
        input_tokens=1101,
        output_tokens=2202,
        cached_tokens=3303,
        cache_write_tokens=4404,
        reasoning_tokens=5505,
        requests=6606,
        tool_calls=7707,
    )

    async def seed() -> None:
        stores = await open_stores(dsn(path))
        try:
            await stores.state.put_run(
                RunRecord(run_id="r", tenant="acme", agent_name="a", usage=usage)
            )
        finally:
            await stores.close()

    asyncio.run(seed())
    code, out, _ = run_cli(capsys, "runs", "show", "--dsn", dsn(path), "--tenant", "acme", "r")
    assert code == 0
    for name, value in usage.model_dump().items():
        assert str(value) in out, f"{name} ({value}) is missing from `runs show`"


def test_queue_stats_dead_letters_and_requeue_work_together(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "queue", "stats", "--dsn", dsn(seeded), "--queue", "mail")
    assert code == 0
    assert out.splitlines()[2].split()[:4] == ["mail", "0", "0", "1"]
    code, out, _ = run_cli(
        capsys, "queue", "dead-letters", "--dsn", dsn(seeded), "--tenant", "acme"
    )
    assert code == 0
    assert "job:1" in out
    assert "SMTP said no" in out
    code, out, _ = run_cli(
        capsys, "queue", "requeue", "--dsn", dsn(seeded), "--tenant", "acme", "job:1", "--json"
    )
    assert code == 0
    assert json.loads(out)["requeued"] == ["job:1"]
    code, out, _ = run_cli(
        capsys, "queue", "stats", "--dsn", dsn(seeded), "--queue", "mail", "--json"
    )
    stats = json.loads(out)["mail"]
    assert (stats["depth"], stats["dead_lettered"]) == (1, 0)


def test_queue_purge_dead_letters_deletes_the_named_one_and_refuses_an_item_alone(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("queue", "purge", "mail", "--dsn", dsn(seeded), "--dead-letters")
    code, _, err = run_cli(capsys, *base, "--item", "job:1")
    assert code == 2
    assert "--item" in err
    code, out, _ = run_cli(capsys, *base, "--tenant", "acme", "--item", "job:2", "--json")
    assert (code, json.loads(out)["purged"]) == (0, 0)
    code, out, _ = run_cli(capsys, *base, "--tenant", "acme", "--item", "job:1")
    assert code == 0
    assert "purged 1 dead letter(s) of queue 'mail'" in out
    code, out, _ = run_cli(capsys, "queue", "stats", "--dsn", dsn(seeded), "--queue", "mail")
    assert out.splitlines()[2].split()[:4] == ["mail", "0", "0", "0"]


def test_requeue_of_a_dead_letter_whose_dedupe_key_a_live_item_holds_is_not_reported_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Enqueueing the dead letter again returns the live item holding its dedupe key (a
    # duplicate): nothing was requeued, and the dead letter stays dead.
    path = tmp_path / "dedupe.db"

    async def seed() -> None:
        stores = await open_stores(dsn(path), policy=QueuePolicy(max_attempts=1))
        try:
            await stores.queue.enqueue(WorkItem(id="old", tenant="acme", dedupe_key="invoice-7"))
            assert await stores.queue.claim(worker="w") is not None
            await stores.queue.fail("old", tenant="acme", worker="w", error="boom")
            await stores.queue.enqueue(WorkItem(id="new", tenant="acme", dedupe_key="invoice-7"))
        finally:
            await stores.close()

    asyncio.run(seed())
    argv = ("queue", "requeue", "--dsn", dsn(path), "--tenant", "acme", "old")
    code, out, err = run_cli(capsys, *argv, "--json")
    reported = json.loads(out)
    assert reported["requeued"] == []
    assert reported["duplicates"] == {"old": "new"}
    assert code == 1
    code, out, err = run_cli(capsys, *argv)
    assert "requeued 0 item(s)" in out
    assert "'new'" in err
    code, out, _ = run_cli(
        capsys, "queue", "dead-letters", "--dsn", dsn(path), "--tenant", "acme", "--json"
    )
    assert [i["id"] for i in json.loads(out)["dead_letters"]] == ["old"]


def test_requeue_all_reaches_past_one_read_of_dead_letters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One read lists at most MAX_LISTED dead letters (3 here); --all reads again after
    # requeueing, and a dead letter a live item's dedupe key keeps dead does not stop it.
    monkeypatch.setattr("durably.cli.queue.MAX_LISTED", 3)
    path = tmp_path / "many.db"
    ids = [f"job-{n}" for n in range(8)]

    async def seed() -> None:
        stores = await open_stores(dsn(path), policy=QueuePolicy(max_attempts=1))
        try:
            for n, item_id in enumerate(ids):
                key = "invoice-1" if n == 1 else None
                await stores.queue.enqueue(WorkItem(id=item_id, tenant="acme", dedupe_key=key))
                assert await stores.queue.claim(worker="w") is not None
                await stores.queue.fail(item_id, tenant="acme", worker="w", error="boom")
            await stores.queue.enqueue(WorkItem(id="live", tenant="acme", dedupe_key="invoice-1"))
        finally:
            await stores.close()

    asyncio.run(seed())
    argv = ("queue", "requeue", "--dsn", dsn(path), "--tenant", "acme")
    code, out, _ = run_cli(capsys, *argv, "--all", "--json")
    reported = json.loads(out)
    assert sorted(reported["requeued"]) == sorted(set(ids) - {"job-1"})
    assert reported["duplicates"] == {"job-1": "live"}
    assert code == 1
    listing = ("queue", "dead-letters", "--dsn", dsn(path), "--tenant", "acme", "--limit", "3")
    code, out, _ = run_cli(capsys, *listing, "--json")
    assert [i["id"] for i in json.loads(out)["dead_letters"]] == ["job-1"]


def test_requeue_of_an_item_that_is_not_dead_fails_with_exit_code_one(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, "queue", "requeue", "--dsn", dsn(seeded), "--tenant", "acme", "nope"
    )
    assert code == 1
    assert "'nope' is not a dead letter" in err


def test_requeue_needs_item_ids_or_all(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "queue", "requeue", "--dsn", dsn(seeded), "--tenant", "acme")
    assert code == 2
    assert "ITEM_IDs or pass --all" in err


def test_workflows_list_show_and_delete(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "workflows", "show", "--dsn", dsn(seeded), "wf {1}")
    assert code == 0
    assert "input" in out
    assert "never run by a worker" in out
    code, out, _ = run_cli(capsys, "workflows", "show", "--dsn", dsn(seeded), "wf {1}", "--json")
    shown = json.loads(out)
    assert shown["history"][0]["key"] == "input"
    assert shown["history"][0]["value"] == {"name": "Ada"}
    code, out, _ = run_cli(
        capsys, "workflows", "delete", "--dsn", dsn(seeded), "wf {1}", "--kind", "greeter"
    )
    assert code == 0
    assert "1 record(s)" in out
    code, _, err = run_cli(capsys, "workflows", "show", "--dsn", dsn(seeded), "wf {1}")
    assert code == 1
    assert "no workflow" in err


async def _with_status(path: Path) -> None:
    stores = await open_stores(dsn(path))
    try:
        for name in ("b", "a", "c"):
            holder = await stores.checkpointer.claim(name, 5.0, 5.0)
            assert holder is not None
            status = WorkflowStatus.FAILED if name == "c" else WorkflowStatus.COMPLETED
            await stores.checkpointer.set_status(holder, status, attempts=2, error="boom")
    finally:
        await stores.close()


def test_workflows_list_orders_by_id_and_filters_by_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wf.db"
    asyncio.run(_with_status(path))
    code, out, _ = run_cli(
        capsys, "workflows", "list", "--store-order", "--dsn", dsn(path), "--json"
    )
    assert code == 0
    assert [w["workflow"] for w in json.loads(out)["workflows"]] == ["a", "b", "c"]
    code, out, _ = run_cli(
        capsys, "workflows", "list", "--store-order", "--dsn", dsn(path), "--status", "failed"
    )
    assert code == 0
    assert "c" in out.split()
    assert "a" not in out.split()


def test_schema_prints_ddl_and_migrate_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "schema", "--backing", "sqlite")
    assert code == 0
    assert "CREATE TABLE" in out
    code, out, _ = run_cli(capsys, "schema", "--backing", "redis")
    assert "keeps no schema" in out
    for _ in range(2):
        code, out, _ = run_cli(capsys, "migrate", "--dsn", dsn(tmp_path / "new.db"))
        assert code == 0
        assert "schema up to date" in out


def test_bad_arguments_exit_with_code_two_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DURABLY_DSN", raising=False)
    cases = [
        ("runs", "list", "--tenant", "acme"),  # no store named
        ("runs", "list", "--dsn", "mysql://x/y", "--tenant", "acme"),
        ("runs", "list", "--dsn", "sqlite:relative.db", "--tenant", "acme"),
        ("runs", "list", "--dsn", "memory://", "--tenant", "acme", "--limit", "0"),
        ("runs", "list", "--dsn", "memory://", "--tenant", ""),
        ("runs", "frobnicate"),
        ("schema",),
        ("worker", "no_colon", "--dsn", "memory://"),
        ("worker", "no_such_module_xyz:setup", "--dsn", "memory://"),
        ("queue", "requeue", "--dsn", "memory://", "--tenant", "acme", ""),
        ("queue", "dead-letters", "--dsn", "memory://", "--limit", str(2**63)),
        ("runs", "list", "--dsn", "postgresql://u:s3cret%PW@127.0.0.1/db", "--tenant", "a"),
        ("runs", "list", "--dsn", "redis://:pa%zzss@127.0.0.1:1/0", "--tenant", "a"),
    ]
    for argv in cases:
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, argv
        assert "Traceback" not in out + err


def test_an_unreachable_store_exits_with_code_one_and_never_prints_the_dsn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "postgresql://admin:hunter2-secret@127.0.0.1:1/app"
    code, out, err = run_cli(capsys, "runs", "list", "--dsn", secret, "--tenant", "acme")
    assert code == 1
    assert "hunter2" not in out + err
    assert "Traceback" not in out + err


def test_a_file_that_is_not_a_database_is_named_in_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a SQLite database, not even close" * 100)
    code, out, err = run_cli(capsys, "runs", "list", "--dsn", dsn(junk), "--tenant", "acme")
    assert code == 1
    assert str(junk) in err
    assert "Traceback" not in out + err


def test_a_dsn_is_described_without_its_credentials() -> None:
    dsn_text = "redis://user:pa%40ss@cache.internal:6380/2"
    assert describe(dsn_text) == "redis cache.internal:6380/2"
    assert "pa@ss" not in scrub("auth failed for pa@ss at " + dsn_text, dsn_text)
    assert describe("sqlite:////var/lib/app.db") == "sqlite /var/lib/app.db"


SETUP_MODULE = """
from durably import WorkItem

async def greet(item: WorkItem) -> None:
    with open(item.payload["out"], "a") as handle:
        handle.write(item.id + "\\n")

def setup(worker, stores):
    worker.handle(stores.queue, greet, name="greetings", concurrency=2)
"""


async def _enqueue(path: Path, out: Path, ids: list[str]) -> None:
    stores = await open_stores(dsn(path))
    try:
        for item_id in ids:
            item = WorkItem(id=item_id, tenant="t", queue="greetings", payload={"out": str(out)})
            await stores.queue.enqueue(item)
    finally:
        await stores.close()


def test_the_worker_command_serves_what_the_setup_function_registers(tmp_path: Path) -> None:
    (tmp_path / "myjobs.py").write_text(textwrap.dedent(SETUP_MODULE))
    path, out = tmp_path / "app.db", tmp_path / "done.txt"
    asyncio.run(_enqueue(path, out, ["one", "two", "three"]))
    env = {**os.environ, "PYTHONPATH": SRC}
    worker = subprocess.Popen(
        [sys.executable, "-m", "durably", "worker", "myjobs:setup", "--dsn", dsn(path),
         "--poll-seconds", "0.1", "--log-level", "WARNING"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().split()) == 3:
                break
            assert worker.poll() is None, worker.communicate()[0].decode()
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=15)[0].decode()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert sorted(out.read_text().split()) == ["one", "three", "two"]
    assert worker.returncode == 0, output
    assert "Traceback" not in output
