"""The package's promises about itself: the core imports no driver, the public names
are where SPEC says, and the data files ship."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import durably

DRIVERS = ("psycopg", "psycopg_pool", "asyncpg", "redis", "sqlite3", "hiredis")


def test_importing_the_core_imports_no_datastore_driver() -> None:
    probe = (
        "import sys, durably, durably.errors, durably.testing;"
        f"print(','.join(m for m in {DRIVERS!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == ""


def test_the_everyday_names_are_importable_from_the_top_level() -> None:
    names = """StateStore WorkQueue Checkpointer Scheduler Durable SplitDurable RunRecord RunState
    SessionRecord StateKey StateDelta StateQuery StatePage Usage ToolCall WorkItem WorkState
    WorkPriority QueuePolicy QueueStats Pass Recorded Delivery Entry Written Run resume
    Completed Sleeping Blocked Clock SystemClock ManualClock CheckpointCodec JsonCodec
    Worker""".split()
    missing = [name for name in names if not hasattr(durably, name)]
    assert missing == []
    assert set(names) <= set(durably.__all__)


def test_every_error_type_of_the_spec_lives_in_durably_errors() -> None:
    import durably.errors as errors

    for name in (
        "DurablyError ConfigurationError StateConflictError StateNotFoundError "
        "StateInUseError StatePersistenceError WorkItemNotFoundError LeaseLostError "
        "QueueUnavailableError PoolExhaustedError Interruption Contended Fenced Suspended "
        "InputNeeded MessageNeeded ScheduledWakeup Swallowed"
    ).split():
        assert hasattr(errors, name), name
    assert issubclass(errors.DurablyError, Exception)
    assert not issubclass(errors.Interruption, Exception)
    assert issubclass(errors.Swallowed, Exception)


def test_the_package_is_typed() -> None:
    assert (Path(durably.__file__).parent / "py.typed").is_file()
