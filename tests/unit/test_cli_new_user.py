"""The CLI as a new user meets it: typos do not create databases, options read in any case,
and what it suggests works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from durably.cli import build_parser, main
from durably.cli.demo import command_name

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
