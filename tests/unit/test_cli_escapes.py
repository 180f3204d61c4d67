"""Stored text never drives the operator's terminal: table output shows control
characters as escapes; ``--json`` keeps the exact value."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from durably import RunRecord, WorkItem
from durably.cli import main
from durably.cli.render import printable
from durably.stores import QueuePolicy
from durably.stores.opening import open_stores
from durably.stores.status import WorkflowStatus

# A hyperlink planted with OSC 8, a window title (OSC 0), a screen clear and a bidi override.
HOSTILE = "\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07 \x1b]0;pwned\x07\x1b[2J\u202e"


async def _seed(path: Path) -> None:
    stores = await open_stores(f"sqlite:///{path}", policy=QueuePolicy(max_attempts=1))
    try:
        await stores.state.put_run(
            RunRecord(run_id="r1", tenant="acme", agent_name=HOSTILE, metadata={"note": HOSTILE})
        )
        await stores.queue.enqueue(WorkItem(id="job", tenant="acme", queue="mail"))
        assert await stores.queue.claim(worker="w", queue="mail") is not None
        await stores.queue.fail("job", tenant="acme", worker="w", error=HOSTILE)
        holder = await stores.checkpointer.claim("wf", 5.0, 5.0)
        assert holder is not None
        await stores.checkpointer.record(holder, "step", HOSTILE)
        await stores.checkpointer.set_status(holder, WorkflowStatus.FAILED, error=HOSTILE)
    finally:
        await stores.close()


@pytest.fixture
def hostile_db(tmp_path: Path) -> str:
    path = tmp_path / "hostile.db"
    asyncio.run(_seed(path))
    return f"sqlite:///{path}"


COMMANDS = [
    ("runs", "list", "--tenant", "acme"),
    ("runs", "show", "--tenant", "acme", "r1"),
    ("queue", "dead-letters", "--tenant", "acme"),
    ("workflows", "list", "--store-order"),
    ("workflows", "show", "wf"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_tables_show_stored_control_characters_as_escapes(
    hostile_db: str, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--dsn", hostile_db]) == 0
    out, err = capsys.readouterr()
    for control in ("\x1b", "\x07", "\u202e"):
        assert control not in out + err
    assert "\\x1b]8;;" in out


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_json_output_keeps_the_exact_stored_value(
    hostile_db: str, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--dsn", hostile_db, "--json"]) == 0
    out, _ = capsys.readouterr()
    assert "\x1b" not in out  # JSON escapes control characters itself
    assert "\\u001b]8;;https://evil.example/" in out
    json.loads(out)


def test_printable_escapes_control_and_format_characters_only() -> None:
    assert printable("plain ünïcødé 🙂 text") == "plain ünïcødé 🙂 text"
    assert printable("a\x1b[2Jb\nc\td\x9b\u202e") == "a\\x1b[2Jb\\nc\\td\\x9b\\u202e"
