"""Corrupt or foreign rows, written straight into each real store (SQL ``UPDATE`` of the
records and status tables, Redis ``HSET`` on the keys the backing uses): every handle call
on the damaged workflow gives a typed durably error (never a RecursionError, a raw
ValueError or a driver's error), a pass parks it, resumable once the row is repaired,
nothing else stored changes, and ``durably workflows list/show/delete`` run around it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from durably.app import App, Context, Topic, Workflow
from durably.cli import main as cli_main
from durably.clock import ManualClock
from durably.errors import DurablyError, IncompatibleRecordError, UnreadableRecordError
from durably.stores.status import WorkflowStatus
from tests.pg_service import postgres_dsn
from tests.redis_service import flushed_database

__all__ = ["postgres_dsn"]

SRC = str(Path(__file__).resolve().parents[2] / "src")
REDIS_DB = 9
"""The Redis database index these tests own on the shared test server (flushed first)."""

NOTE: Topic[str] = Topic("note", str)

START, STEP, RESULT = "durably:start", "fetch#1", "durably:result"

PAYLOADS: dict[str, str | bytes] = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "nested 5,000 deep": "[" * 5_000 + "]" * 5_000,
    "a 5,000-digit number": "9" * 5_000,
    "NaN": "NaN",
    "Infinity inside": '{"a": [1, -Infinity]}',
    "not JSON": "{not json",
    "invalid UTF-8": b'"\xff\xfe"',
}
"""Stored texts no reader takes, by what they are."""

WRONG_STARTS: dict[str, str] = {
    "a list": "[1, 2]",
    "a kind that is a number": (
        '{"kind": 5, "args": {"n": 1}, "tenant": "default", "created": 1.0,'
        ' "parent": null, "parent_kind": null, "timeout_at": null}'
    ),
    "a creation time past any date": (
        '{"kind": "corrupt.waits", "args": {"n": 1}, "tenant": "default", "created": 1e300,'
        ' "parent": null, "parent_kind": null, "timeout_at": null}'
    ),
}
"""JSON that reads, but is not of the shape the App writes its start record in."""

Raw = Callable[[str, str, str | bytes], Awaitable[bool]]
"""Writes a stored text as a workflow's record, outside durably; False when the store
itself refuses that text (PostgreSQL's jsonb takes no NaN, no invalid JSON)."""


@dataclass
class Backing:
    name: str
    dsn: str
    write: Raw
    read: Callable[[str, str], Awaitable[str | bytes]]
    write_status: Callable[[str, str, str | bytes], Awaitable[None]]


def _sqlite(path: Path) -> Backing:
    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, isolation_level=None)

    async def write(workflow: str, key: str, stored: str | bytes) -> bool:
        with connect() as db:
            # Bytes as TEXT: SQLite keeps text that is not UTF-8 as it is given.
            value = "CAST(? AS TEXT)" if isinstance(stored, bytes) else "?"
            db.execute(
                f"UPDATE durably_workflow_checkpoint SET value = {value} "
                "WHERE workflow = ? AND key = ?",
                (stored, workflow, key),
            )
        return True

    async def read(workflow: str, key: str) -> str | bytes:
        with connect() as db:
            row = db.execute(
                "SELECT CAST(value AS BLOB) FROM durably_workflow_checkpoint "
                "WHERE workflow = ? AND key = ?",
                (workflow, key),
            ).fetchone()
        return bytes(row[0]).decode()

    async def write_status(workflow: str, column: str, value: str | bytes) -> None:
        with connect() as db:
            cast = "CAST(? AS TEXT)" if isinstance(value, bytes) else "?"
            db.execute(
                f"UPDATE durably_workflow_status SET {column} = {cast} WHERE workflow = ?",
                (value, workflow),
            )

    return Backing("sqlite", f"sqlite:///{path}", write, read, write_status)


def _postgres(dsn: str) -> Backing:
    psycopg = pytest.importorskip("psycopg")

    async def write(workflow: str, key: str, stored: str | bytes) -> bool:
        if isinstance(stored, bytes):
            return False  # a UTF-8 database holds no other text
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
                await db.execute(
                    "UPDATE durably_workflow_checkpoint SET value = %s::jsonb "
                    "WHERE workflow = %s AND key = %s",
                    (stored, workflow, key),
                )
        except (psycopg.DataError, psycopg.errors.StatementTooComplex):
            return False  # jsonb refuses it: no NaN, no invalid JSON, nothing that deep
        return True

    async def read(workflow: str, key: str) -> str | bytes:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
            cursor = await db.execute(
                "SELECT value::text FROM durably_workflow_checkpoint "
                "WHERE workflow = %s AND key = %s",
                (workflow, key),
            )
            row = await cursor.fetchone()
        assert row is not None
        return str(row[0])

    async def write_status(workflow: str, column: str, value: str | bytes) -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
            await db.execute(
                f"UPDATE durably_workflow_status SET {column} = %s WHERE workflow = %s",
                (value, workflow),
            )

    return Backing("postgresql", dsn, write, read, write_status)


def _redis(url: str) -> Backing:
    redis = pytest.importorskip("redis.asyncio")
    from durably.redis.keys import workflow_prefix

    def key_of(workflow: str, name: str) -> str:
        return workflow_prefix("durably", workflow) + name

    async def command(*args: object) -> Any:
        client = redis.from_url(url)
        try:
            return await client.execute_command(*args)
        finally:
            await client.aclose()

    async def write(workflow: str, key: str, stored: str | bytes) -> bool:
        await command("HSET", key_of(workflow, "records"), key, stored)
        return True

    async def read(workflow: str, key: str) -> str | bytes:
        return bytes(await command("HGET", key_of(workflow, "records"), key))

    async def write_status(workflow: str, field: str, value: str | bytes) -> None:
        await command("HSET", key_of(workflow, "status"), field, value)

    return Backing("redis", url, write, read, write_status)


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
async def backing(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backing]:
    if request.param == "sqlite":
        yield _sqlite(tmp_path / "corrupt.db")
    elif request.param == "postgresql":
        yield _postgres(str(request.getfixturevalue("postgres_dsn")))
    else:
        yield _redis(await flushed_database(REDIS_DB))


@dataclass
class Flows:
    app: App
    waits: Workflow[[int], str]
    done: Workflow[[int], int]
    fetched: list[int]


def _flows(dsn: str) -> Flows:
    app = App(dsn, clock=ManualClock())
    fetched: list[int] = []

    @app.step(name="fetch")
    async def fetch(n: int) -> int:
        fetched.append(n)
        return n

    @app.workflow(name="corrupt.waits")
    async def waits(ctx: Context, n: int) -> str:
        await fetch(n)
        return str(await ctx.recv(NOTE))

    @app.workflow(name="corrupt.done")
    async def done(ctx: Context, n: int) -> int:
        return await fetch(n)

    return Flows(app, waits, done, fetched)


def _fresh(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


async def _call(call: Awaitable[object]) -> BaseException | None:
    """What ``call`` raised (None if nothing), refusing any error but a durably one."""
    try:
        await call
    except DurablyError as exc:
        return exc
    except BaseException as exc:  # the point: nothing else may escape
        pytest.fail(f"a raw {type(exc).__name__} escaped: {exc!r}"[:500])
    return None


CASES = [(name, key) for name in PAYLOADS for key in (START, STEP, RESULT)] + [
    (name, START) for name in WRONG_STARTS
]


@pytest.mark.parametrize(("payload", "key"), CASES, ids=[f"{p}@{k}" for p, k in CASES])
async def test_a_damaged_record_gives_typed_errors_parks_the_workflow_and_resumes_repaired(
    backing: Backing, payload: str, key: str
) -> None:
    flows = _flows(backing.dsn)
    app = flows.app
    try:
        completes = key == RESULT
        workflow = flows.done if completes else flows.waits
        handle = await workflow.start(1, id=_fresh("damaged"))
        bystander = await flows.done.start(7, id=_fresh("bystander"))
        await app.run_until_idle()
        checkpointer = (await app.stores()).checkpointer
        untouched = await checkpointer.history(bystander.id)
        original = await backing.read(handle.id, key)

        stored = PAYLOADS.get(payload, WRONG_STARTS.get(payload, ""))
        if not await backing.write(handle.id, key, stored):
            pytest.skip(f"{backing.name} refuses this text itself: it cannot be stored")

        # Every call on the damaged workflow: typed, and where it must read the damaged
        # record, an IncompatibleRecordError (an UnreadableRecordError for unreadable text).
        expected = IncompatibleRecordError if payload in WRONG_STARTS else UnreadableRecordError
        failed = await _call(handle.result(timeout=0.05))
        # At once for the result or start record, else in place of the TimeoutError.
        assert isinstance(failed, expected)
        assert failed.key == key
        assert failed.workflow == handle.id
        status = await _call(handle.status())
        if key == START:
            assert isinstance(status, expected)
        else:
            assert status is None  # the status reads around a record it does not need
        # A send reads only the start record and the markers: it may land around damage
        # elsewhere, and is then kept for after the repair.
        sent = await _call(handle.send(NOTE, "hello")) is None
        for call in (handle.cancel(), handle.resume()):
            await _call(call)

        # A pass meets the damage and parks the workflow (without using an attempt).
        await app._core.durable(workflow.kind).scheduler.make_ready(handle.id)
        await app.run_until_idle()
        info = await checkpointer.get_status(handle.id)
        assert info is not None
        assert info.status is WorkflowStatus.PARKED
        assert key in (info.last_error or "")
        assert info.attempts == 0

        # Nothing else stored changed.
        assert await checkpointer.history(bystander.id) == untouched
        assert await bystander.result(timeout=5) == 7

        # Repaired, it resumes and ends as it would have, its step not run again.
        assert await backing.write(handle.id, key, original)
        assert await handle.resume()
        if not completes:
            await handle.send(NOTE, "repaired")
        await app.run_until_idle()
        expected_result = 1 if completes else ("hello" if sent else "repaired")
        assert await handle.result(timeout=5) == expected_result
        assert flows.fetched.count(1) == 1
    finally:
        await app.close()


STATUS_DAMAGE: dict[str, list[tuple[str, str | bytes]]] = {
    "sqlite": [("status", "bogus"), ("attempts", "many"), ("last_error", b"\xff\xfe")],
    "postgresql": [("status", "bogus")],
    "redis": [("status", "bogus"), ("attempts", "many"), ("updated_at", "yesterday")],
}


async def test_a_damaged_status_row_gives_typed_errors_and_a_pass_parks_the_workflow(
    backing: Backing,
) -> None:
    for column, value in STATUS_DAMAGE[backing.name]:
        flows = _flows(backing.dsn)
        app = flows.app
        try:
            handle = await flows.waits.start(1, id=_fresh("status"))
            await app.run_until_idle()
            await backing.write_status(handle.id, column, value)
            for call in (
                handle.status(),
                handle.result(timeout=0.05),
                handle.cancel(),
                handle.resume(),
            ):
                failed = await _call(call)
                assert isinstance(failed, UnreadableRecordError), column
                assert failed.key == "status"
            # A send asks the store only whether the workflow has finished: a status no
            # store knows is not finished, so the message is kept for after the repair.
            sent = await _call(handle.send(NOTE, "x")) is None
            # A pass parks it: its status reads again, and says why.
            await app._core.durable(flows.waits.kind).scheduler.make_ready(handle.id)
            await app.run_until_idle()
            info = await handle.status()
            assert info.status is WorkflowStatus.PARKED, column
            assert "status" in (info.last_error or "")
            assert await handle.resume()
            await handle.send(NOTE, "on")
            await app.run_until_idle()
            assert await handle.result(timeout=5) == ("x" if sent else "on")
        finally:
            await app.close()


def _cli(dsn: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``durably workflows ...`` in a process of its own (the real entry point)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "durably", "workflows", *argv, "--dsn", dsn],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


async def _cli_here(dsn: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The same command run by the CLI's `main` in this process (in a thread: it runs an
    event loop of its own), its output captured: what a subprocess would print, without a
    second interpreter's start-up for each of the many calls below. An exception escaping
    `main` fails the test, as a traceback would."""
    args = ["workflows", *argv, "--dsn", dsn]

    def run() -> int:
        try:
            return cli_main(args)
        except SystemExit as exit:  # how the CLI ends on a usage error, as the process would
            return int(exit.code or 0)

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = await asyncio.to_thread(run)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


async def test_the_workflows_cli_lists_shows_and_deletes_around_damaged_rows(
    backing: Backing,
) -> None:
    flows = _flows(backing.dsn)
    app = flows.app
    damaged: dict[str, str] = {}
    try:
        healthy = await flows.done.start(3, id=_fresh("healthy"))
        for name, stored in PAYLOADS.items():
            handle = await flows.waits.start(1, id=_fresh("step"))
            await app.run_until_idle()
            if await backing.write(handle.id, STEP, stored):
                damaged[handle.id] = name
        start = await flows.waits.start(1, id=_fresh("start"))
        await app.run_until_idle()
        assert await backing.write(start.id, START, WRONG_STARTS["a list"])
        unreadable_status = await flows.waits.start(1, id=_fresh("status"))
        await app.run_until_idle()
        await backing.write_status(unreadable_status.id, "status", "bogus")
        untouched = await (await app.stores()).checkpointer.history(healthy.id)
    finally:
        await app.close()

    outputs: list[subprocess.CompletedProcess[str]] = []
    listed = _cli(backing.dsn, "list", "--store-order", "--limit", "100")
    outputs.append(listed)
    assert listed.returncode == 0
    for workflow in [*damaged, start.id, unreadable_status.id, healthy.id]:
        assert workflow in listed.stdout
    assert "unreadable" in listed.stdout
    as_json = _cli(backing.dsn, "list", "--store-order", "--limit", "100", "--json")
    outputs.append(as_json)
    assert as_json.returncode == 0
    rows = {row["workflow"]: row for row in json.loads(as_json.stdout)["workflows"]}
    for workflow in [*damaged, start.id, unreadable_status.id]:
        assert rows[workflow]["unreadable"], workflow
    assert rows[healthy.id]["unreadable"] is None
    filtered = _cli(backing.dsn, "list", "--store-order", "--status", "blocked", "--limit", "100")
    outputs.append(filtered)
    assert filtered.returncode == 0
    assert all(workflow in filtered.stdout for workflow in damaged)
    assert unreadable_status.id not in filtered.stdout  # its status is none of them

    for workflow in damaged:
        shown = await _cli_here(backing.dsn, "show", workflow)
        outputs.append(shown)
        assert shown.returncode == 0
        assert "cannot be read" in shown.stdout
        assert STEP in shown.stdout
    shown = await _cli_here(backing.dsn, "show", unreadable_status.id)
    outputs.append(shown)
    assert shown.returncode == 0
    assert "status cannot be read" in shown.stdout

    # The kind of a workflow whose start record is damaged is not known: say so.
    refused = await _cli_here(backing.dsn, "delete", start.id)
    outputs.append(refused)
    assert refused.returncode == 2
    assert "--kind" in refused.stderr
    for workflow, kind in [(start.id, "corrupt.waits"), *((w, "") for w in damaged)]:
        deleted = await _cli_here(
            backing.dsn, "delete", workflow, *(("--kind", kind) if kind else ())
        )
        outputs.append(deleted)
        assert deleted.returncode == 0, deleted.stderr
        gone = await _cli_here(backing.dsn, "show", workflow)
        assert gone.returncode == 1
    for output in outputs:
        assert "Traceback" not in output.stdout + output.stderr

    flows = _flows(backing.dsn)
    try:
        checkpointer = (await flows.app.stores()).checkpointer
        assert await checkpointer.history(healthy.id) == untouched
    finally:
        await flows.app.close()


async def test_a_parent_meeting_its_child_s_damaged_record_parks_and_resumes_repaired(
    backing: Backing,
) -> None:
    flows = _flows(backing.dsn)
    app = flows.app

    @app.workflow(name="corrupt.parent")
    async def parent(ctx: Context) -> str:
        return await ctx.child(flows.waits, 1, id=f"{ctx.id}-child")

    try:
        handle = await parent.start(id=_fresh("parent"))
        await app.run_until_idle()
        child = f"{handle.id}-child"
        original = await backing.read(child, START)
        assert await backing.write(child, START, PAYLOADS["a 5,000-digit number"])
        await app._core.durable(parent.kind).scheduler.make_ready(handle.id)
        await app.run_until_idle()
        info = await handle.status()
        assert info.status is WorkflowStatus.PARKED  # not failed: resumable
        assert child in (info.last_error or "")
        assert await backing.write(child, START, original)
        assert await handle.resume()
        await (await app.get_handle(child)).send(NOTE, "from the child")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "from the child"
    finally:
        await app.close()
