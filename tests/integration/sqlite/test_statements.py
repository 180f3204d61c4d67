"""Every named statement the SQLite backing ships compiles against its own schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from durably.sqlite import connect
from durably.sqlite.statements import load_statements, split_script

SQL_FILES = ("connection.sql", "state.sql", "queue.sql", "checkpointer.sql", "scheduler.sql")


class _Nulls(dict[str, object]):
    """Binds NULL to every named parameter, enough for SQLite to compile a statement."""

    def __missing__(self, key: str) -> object:
        return None


class _Ones(dict[str, object]):
    """Formats 1 into every named field of a statement's text."""

    def __missing__(self, key: str) -> object:
        return 1


@pytest.mark.parametrize("filename", SQL_FILES)
async def test_every_named_statement_compiles_against_the_schema(
    tmp_path: Path, filename: str
) -> None:
    path = tmp_path / "compile.db"
    await (await connect(path)).close()
    statements = load_statements(filename)
    assert statements, f"{filename} names no statement"
    with sqlite3.connect(path) as raw:
        for name, statement in statements.items():
            if statement.lstrip().upper().startswith("ALTER TABLE"):
                # An upgrade step adds what the current schema already has, so it cannot
                # compile here; the upgrade tests run it against an older file.
                continue
            if "{" in statement:  # a PRAGMA binds no parameter: its value is formatted in
                statement = statement.format_map(_Ones())
            try:
                raw.execute(f"EXPLAIN {statement}", _Nulls())
            except sqlite3.Error as exc:
                pytest.fail(f"{filename}:{name} does not compile: {exc}")
    raw.close()


def test_a_schema_script_splits_into_whole_statements() -> None:
    script = "-- a comment\nCREATE TABLE a (x TEXT DEFAULT ';');\n\nCREATE INDEX i ON a (x);\n"
    assert split_script(script) == [
        "CREATE TABLE a (x TEXT DEFAULT ';');",
        "CREATE INDEX i ON a (x);",
    ]
