"""A type checker checks a workflow's arguments: ``start``, ``run``, ``options(...).start``,
``ctx.child`` and ``ctx.start_child`` against the body's parameters, and results against
its return type.

One ``mypy --strict`` run over snippets that must pass and snippets that must fail: each
line that must fail ends with ``# fails: CODE``, and every other line must pass.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPETS = """
from datetime import timedelta

from pydantic import BaseModel

from durably import App, Context, WorkflowHandle

app = App("memory://")


class Ticket(BaseModel):
    title: str


@app.workflow(name="notify")
async def notify(ctx: Context, text: str) -> int:
    return len(text)


@app.step(name="shout")
async def shout(text: str) -> str:
    return text.upper()


@app.workflow(name="triage")
async def triage(ctx: Context, ticket: Ticket, *, urgent: bool = False) -> str:
    shout(ticket.title)  # fails: unused-coroutine
    await shout(3)  # fails: arg-type
    sent: int = await ctx.child(notify, ticket.title)
    named: int = await ctx.child(notify.options(id="n-1"), ticket.title)
    kept: int = await ctx.child(notify, ticket.title, id="n-2")
    later: WorkflowHandle[int] = await ctx.start_child(notify, "hi")
    fanned: WorkflowHandle[int] = await ctx.start_child(notify.options(timeout=60), "hi")
    await ctx.child(notify, 3)  # fails: call-overload
    await ctx.child(notify)  # fails: call-overload
    await ctx.child(notify.options(id="n-3"), 3)  # fails: call-overload
    await ctx.start_child(notify, b"bytes")  # fails: call-overload
    wrong: str = await ctx.child(notify, "hi")  # fails: call-overload
    return f"{sent}{named}{kept}{later.id}{fanned.id}{wrong}"


async def passes() -> None:
    ticket = Ticket(title="disk full")
    handle: WorkflowHandle[str] = await triage.start(ticket)
    await triage.start(ticket, urgent=True)
    await triage.start(ticket, id="t-1")
    await triage.start(ticket, tenant="acme", timeout=5)
    await triage.start(ticket, timeout=timedelta(minutes=5))
    await triage.options(id="t-2", tenant="acme", timeout=timedelta(hours=1)).start(ticket)
    await triage.options(id="t-3").start(ticket, urgent=True)
    result: str = await triage.run(ticket)
    options_result: str = await triage.options(id="t-4").run(ticket)
    print(handle.id, result, options_result)


async def fails() -> None:
    ticket = Ticket(title="disk full")
    await triage.start("not a ticket")  # fails: call-overload
    await triage.start()  # fails: call-overload
    await triage.start(ticket, urgent="yes")  # fails: call-overload
    await triage.start(ticket, unknown=1)  # fails: call-overload
    await triage.run(ticket, ticket)  # fails: call-overload
    await triage.options(id="t-5").start("not a ticket")  # fails: arg-type
    await triage.options(id="t-6").start()  # fails: call-arg
    await triage.options(id="t-7").run(ticket, urgent=1)  # fails: arg-type
    await triage.options(tenant=3).start(ticket)  # fails: arg-type
    number: int = await triage.run(ticket)  # fails: assignment
    handle: WorkflowHandle[int] = await triage.start(ticket)  # fails: assignment
    print(number, handle)
"""


def test_mypy_checks_workflow_arguments_and_results(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "workflow_snippets.py"
    source.write_text(SNIPPETS)
    lines = SNIPPETS.splitlines()
    expected = {
        (number, match[1])
        for number, line in enumerate(lines, start=1)
        if (match := re.search(r"# fails: ([\w-]+)$", line))
    }
    assert len(expected) >= 15
    out, err, _ = api.run(
        [
            str(source),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),  # the project's own runs keep it warm
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
        ]
    )
    found = {
        (int(match[1]), match[2])
        for match in re.finditer(
            r"^[^\n]*workflow_snippets\.py:(\d+): error: .*\[([\w-]+)\]$", out, re.M
        )
    }
    assert err == ""
    missing = sorted(expected - found)
    unexpected = sorted(found - expected)
    assert missing == [], "\n".join(f"should fail: {lines[n - 1].strip()}" for n, _ in missing)
    assert unexpected == [], f"should pass:\n{out}"
