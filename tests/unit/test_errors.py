"""Errors carry whether a retry may help and the context needed to act on them."""

from __future__ import annotations

import pytest

from durably.errors import (
    ConfigurationError,
    LeaseLostError,
    PoolExhaustedError,
    QueueUnavailableError,
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
    StatePersistenceError,
    WorkItemNotFoundError,
)
from durably.stores.runs import StateKey


@pytest.mark.parametrize(
    ("reason", "retryable"), [("unavailable", True), ("contended", True), ("too_large", False)]
)
def test_a_persistence_error_is_retryable_unless_the_value_is_too_large(
    reason: str, retryable: bool
) -> None:
    error = StatePersistenceError("redis", reason)  # type: ignore[arg-type]
    assert error.retryable is retryable
    assert error.reason == reason
    assert "redis" in str(error)


@pytest.mark.parametrize("reason", ["taken", "expired", "capped"])
def test_a_lost_lease_is_never_retryable_and_names_both_workers(reason: str) -> None:
    error = LeaseLostError("item-1", "w1", "w2", reason)  # type: ignore[arg-type]
    assert error.retryable is False
    assert (error.item_id, error.worker, error.holder, error.reason) == (
        "item-1",
        "w1",
        "w2",
        reason,
    )
    assert "w1" in str(error)
    assert "w2" in str(error)


def test_transient_queue_and_pool_errors_are_retryable() -> None:
    assert QueueUnavailableError("default", "claim").retryable is True
    assert PoolExhaustedError("postgres", 10).retryable is True
    assert ConfigurationError("no table").retryable is False


def test_state_errors_carry_their_key_and_numbers() -> None:
    key = StateKey(tenant="acme", id="run-1")
    conflict = StateConflictError(key, 3, 5)
    assert (conflict.key, conflict.expected_version, conflict.actual_version) == (key, 3, 5)
    assert "3" in str(conflict)
    assert "5" in str(conflict)
    assert StateNotFoundError(key, "run").kind == "run"
    in_use = StateInUseError(key, ("r1", "r2"))
    assert in_use.live_runs == ("r1", "r2")
    missing = WorkItemNotFoundError("item-9", "acme")
    assert (missing.item_id, missing.tenant) == ("item-9", "acme")
