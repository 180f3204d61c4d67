"""QueuePolicy: the one place backoff, dead letters and lease lengths are decided."""

from __future__ import annotations

import math

import pytest

from durably.errors import InvalidInputError
from durably.stores.work import ITEM_RETRY_FIELD, QueuePolicy


def test_the_defaults_are_the_documented_ones() -> None:
    policy = QueuePolicy()
    assert (policy.lease_seconds, policy.max_attempts, policy.backoff_seconds) == (30, 5, 1)
    assert (policy.backoff_cap_seconds, policy.max_lease_seconds) == (300, 3600)


def test_backoff_doubles_from_the_base_and_stops_at_the_cap() -> None:
    policy = QueuePolicy(backoff_seconds=0.5, backoff_cap_seconds=5.0)
    assert [policy.backoff_for(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_no_attempt_means_no_backoff() -> None:
    policy = QueuePolicy()
    assert policy.backoff_for(0) == 0.0
    assert policy.backoff_for(-3) == 0.0


def test_a_huge_attempt_count_backs_off_by_the_cap_without_overflowing() -> None:
    policy = QueuePolicy(backoff_cap_seconds=300.0)
    assert policy.backoff_for(10**9) == 300.0


def test_a_retryable_failure_below_the_limit_requeues_after_its_backoff() -> None:
    policy = QueuePolicy(max_attempts=5, backoff_seconds=2.0)
    settled = policy.settle_failure(2, retryable=True, now=100.0)
    assert (settled.attempts, settled.dead, settled.available_at) == (3, False, 108.0)


def test_an_immediate_settlement_requeues_at_once() -> None:
    settled = QueuePolicy().settle_failure(0, retryable=True, now=100.0, immediate=True)
    assert (settled.attempts, settled.dead, settled.available_at) == (1, False, 100.0)


def test_reaching_the_attempt_limit_dead_letters() -> None:
    policy = QueuePolicy(max_attempts=3)
    assert not policy.settle_failure(1, retryable=True, now=0.0).dead
    settled = policy.settle_failure(2, retryable=True, now=0.0)
    assert (settled.attempts, settled.dead, settled.available_at) == (3, True, None)


def test_a_failure_that_is_not_retryable_dead_letters_on_the_first_attempt() -> None:
    settled = QueuePolicy().settle_failure(0, retryable=False, now=0.0)
    assert (settled.attempts, settled.dead) == (1, True)


def test_a_single_attempt_policy_dead_letters_every_failure() -> None:
    settled = QueuePolicy(max_attempts=1).settle_failure(0, retryable=True, now=0.0)
    assert settled.dead


def test_a_claim_gets_the_policy_lease_or_its_own_but_never_above_the_cap() -> None:
    policy = QueuePolicy(lease_seconds=30.0, max_lease_seconds=60.0)
    assert policy.lease_for(None) == 30.0
    assert policy.lease_for(5) == 5.0
    assert policy.lease_for(600) == 60.0
    assert QueuePolicy(lease_seconds=90.0, max_lease_seconds=60.0).lease_for(None) == 60.0


@pytest.mark.parametrize("lease", [0, -1, math.nan, math.inf, True])
def test_a_claim_lease_that_is_not_a_positive_duration_is_refused(lease: float) -> None:
    with pytest.raises(InvalidInputError):
        QueuePolicy().lease_for(lease)


@pytest.mark.parametrize(
    "field", ["lease_seconds", "backoff_seconds", "backoff_cap_seconds", "max_lease_seconds"]
)
@pytest.mark.parametrize("value", [0, -1.0, math.nan])
def test_a_policy_duration_that_is_not_positive_is_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        QueuePolicy(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [0, -1, True])
def test_a_policy_without_a_first_attempt_is_refused(attempts: int) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        QueuePolicy(max_attempts=attempts)


def test_an_item_carrying_a_retry_policy_is_settled_by_its_attempts_and_waits() -> None:
    queue = QueuePolicy(max_attempts=5, backoff_seconds=1.0)
    carried = queue.for_item({ITEM_RETRY_FIELD: "[8,3.0,20.0,3.0]"})
    assert carried.max_attempts == 8
    assert [carried.backoff_for(n) for n in (1, 2, 3)] == [3.0, 9.0, 20.0]
    assert carried.lease_seconds == queue.lease_seconds
    assert not carried.settle_failure(6, retryable=True, now=0.0).dead
    assert carried.settle_failure(7, retryable=True, now=0.0).dead
    # A task's `Retry(initial=0)`: requeued at once, in effect.
    assert queue.for_item({ITEM_RETRY_FIELD: "[2,0,0,1]"}).backoff_for(1) <= 1e-6


def test_an_item_carrying_no_readable_retry_policy_is_settled_by_the_queues() -> None:
    queue = QueuePolicy()
    for payload in (
        {},
        {ITEM_RETRY_FIELD: "not json"},
        {ITEM_RETRY_FIELD: "[0,1,1,2]"},
        {ITEM_RETRY_FIELD: "[2,1,1,0.5]"},
        {ITEM_RETRY_FIELD: "[2,1]"},
        {ITEM_RETRY_FIELD: '{"max": 2}'},
        {ITEM_RETRY_FIELD: "[2,NaN,1,2]"},
    ):
        assert queue.for_item(payload) is queue, payload
