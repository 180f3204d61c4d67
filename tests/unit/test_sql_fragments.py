"""The SQL files' fragments: text that several statements share, taken in when loaded."""

from __future__ import annotations

from importlib import resources

import pytest

from durably.postgres import statements
from durably.sqlite.statements import load_script, rendered_script

FILES = sorted(
    entry.name
    for entry in resources.files("durably.postgres").joinpath("sql").iterdir()
    if entry.name.endswith(".sql")
)

# Files whose statements take in another file's fragments (as their loaders say).
FRAGMENTS_FROM = {
    "gates.sql": ("checkpointer.sql",),
    "starting.sql": ("scheduler.sql", "state.sql"),
}


@pytest.mark.parametrize("filename", FILES)
def test_no_loaded_statement_keeps_a_fragment_or_names_one(filename: str) -> None:
    loaded = statements.load(filename, fragments_from=FRAGMENTS_FROM.get(filename, ()))
    assert not [name for name in loaded if name.startswith("_")]
    assert not [name for name, body in loaded.items() if "{_" in body]


def test_both_enqueues_take_in_the_same_rotation_writes() -> None:
    loaded = statements.load("queue.sql")
    placed = "INSERT INTO {rota} (queue, tenant, turn, available_at, seq)"
    token = "INSERT INTO {enqueues} (token, tenant, id, written_at)"
    for name in ("enqueue", "enqueue_carrying"):
        assert loaded[name].count(placed) == 1, name
        assert loaded[name].count(token) == 1, name
    tail = loaded["enqueue"][loaded["enqueue"].index(placed) :]
    assert loaded["enqueue_carrying"].endswith(tail)


def test_the_sqlite_run_totals_triggers_take_in_one_text_each() -> None:
    script = load_script("schema.sql")
    insert, delete, update = (
        next(s for s in script if f"TRIGGER IF NOT EXISTS durably_runs_totalled_{event}" in s)
        for event in ("insert", "delete", "update")
    )
    added = "INSERT INTO durably_run_totals ("
    taken = "UPDATE durably_run_totals SET runs = runs - 1,"
    assert [added in t for t in (insert, delete, update)] == [True, False, True]
    assert [taken in t for t in (insert, delete, update)] == [False, True, True]
    body = insert[insert.index(added) : insert.index("END;")]
    assert update.endswith(body + "END;")
    old = delete[delete.index(taken) : delete.index("END;")]
    assert old in update
    assert not [s for s in script if "{_" in s]


def test_a_sqlite_script_fragment_is_indented_as_its_placeholder() -> None:
    text = "BEGIN\n    {_x};\nEND;\n-- name: _x\nSELECT 1\nFROM t\n"
    assert rendered_script(text) == "BEGIN\n    SELECT 1\n    FROM t;\nEND;\n"


@pytest.mark.parametrize(
    "text", ["{_missing};\n", "SELECT 1;\n-- name: whole\nSELECT 2\n"], ids=["undefined", "named"]
)
def test_a_sqlite_script_refuses_a_fragment_it_cannot_take_in(text: str) -> None:
    with pytest.raises(RuntimeError):
        rendered_script(text)
