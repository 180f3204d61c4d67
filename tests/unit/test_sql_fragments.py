"""The SQL files' fragments: text that several statements share, taken in when loaded."""

from __future__ import annotations

from importlib import resources

import pytest

from durably.postgres import statements

FILES = sorted(
    entry.name
    for entry in resources.files("durably.postgres").iterdir()
    if entry.name.endswith(".sql")
)


@pytest.mark.parametrize("filename", FILES)
def test_no_loaded_statement_keeps_a_fragment_or_names_one(filename: str) -> None:
    loaded = statements.load(filename)
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
