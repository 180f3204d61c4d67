"""The package's promises about itself: the core imports no driver, each namespace exports
exactly its pinned names, and the data files ship."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

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


# Each namespace's exported names, pinned: a name added or dropped is a decision, made here.
NAMESPACES = {
    "durably": """App Context StepContext context Limits Retry Step Task Topic Workflow
    WorkflowHandle DurablyError ConfigurationError ChildWorkflowFailedError
    IncompatibleRecordError NondeterminismError NonRetryable StepFailedError StepResultError
    StepTimeoutError WorkflowCancelledError WorkflowConflictError WorkflowFailedError
    WorkflowFinishedError WorkflowLimitError WorkflowNotFoundError Clock ManualClock SystemClock
    Stores open_stores WorkflowInfo
    WorkflowStatus RunRecord RunState SessionRecord StateKey ToolCall Usage WorkItem WorkState
    WorkPriority QueueStats Throttle""",
    "durably.stores": """StateStore StateDelta StatePage StateQuery RunRecord RunState
    SessionRecord StateKey ToolCall Usage WorkQueue QueuePolicy QueueStats DeadLetterPage
    WorkItem WorkState WorkPriority Checkpointer Scheduler Durable SplitDurable CheckpointCodec
    JsonCodec Pass Entry Written Recorded Finish Restart Blocked Sleeping Completed Delivery
    WorkflowInfo WorkflowStatus Stores open_stores Throttle""",
    "durably.engine": """Execution advance resume Worker start_workflow QueueService
    WorkflowService ServiceContext Body Handler Schedule tick_of""",
    "durably.otel": """INSTALLED OTHER STATUS_BOUND STEP_LABELS TENANT_LABELS Gauges
    QueueGauges enqueuing metrics_on read_gauges read_queues read_workflows_by_status
    serve_prometheus tenant_labels trace_ids tracing_on""",
    "durably.logging": "FieldsFormatter JsonFormatter fields_of utc_time",
    "durably.pydantic_ai": """DurableAgent Approval PendingApproval Price APPROVALS_EVENT""",
    "durably.claimcheck": """ClaimCheckStore ClaimCheckPolicy ClaimCheckedCheckpointer
    ClaimCheckedDurable ClaimCheckedQueue FileClaimCheckStore""",
    "durably.dashboard": "DEFAULT_QUEUES dashboard",
}


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
def test_each_namespace_exports_exactly_its_pinned_names(namespace: str) -> None:
    module = importlib.import_module(namespace)
    pinned = set(NAMESPACES[namespace].split())
    assert set(module.__all__) == pinned
    assert [name for name in sorted(pinned) if not hasattr(module, name)] == []


def test_the_top_level_namespace_stays_small() -> None:
    assert len(durably.__all__) <= 45


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
