"""The unvalidated fast paths of `durably.work` build what validation would."""

from __future__ import annotations

import copy
import pickle

from durably.stores.work import WorkItem, WorkPriority, WorkState, queued_copy, stored_item

FIELDS: dict[str, object] = {
    "id": "a",
    "tenant": "t",
    "queue": "q",
    "payload": {"x": "1"},
    "priority": WorkPriority.HIGH,
    "dedupe_key": "k",
    "attempts": 2,
    "state": WorkState.CLAIMED,
    "worker": "w",
    "enqueued_at": 1.0,
    "available_at": 1.5,
    "lease_expires_at": 9.0,
    "first_claimed_at": 1.5,
    "claimed_at": 2.0,
    "failures": ("boom",),
    "concurrency_key": "ck",
    "concurrency_limit": 3,
    "throttle_key": "tk",
    "throttle_seconds": 0.5,
    "throttle_burst": 2,
}


def test_a_stored_item_equals_the_validated_one_and_shares_nothing() -> None:
    first = stored_item(dict(FIELDS))
    second = stored_item({**FIELDS, "id": "b"})
    assert first == WorkItem(**FIELDS)  # type: ignore[arg-type]
    assert first.model_fields_set == set(WorkItem.model_fields)
    assert (first.id, second.id) == ("a", "b")


def test_a_queued_copy_resets_the_holding_and_keeps_attempts_and_failures() -> None:
    held = WorkItem(**FIELDS)  # type: ignore[arg-type]
    queued = queued_copy(held, 5.0)
    assert queued == held.model_copy(
        update={
            "state": WorkState.QUEUED,
            "worker": None,
            "lease_expires_at": None,
            "claimed_at": None,
            "first_claimed_at": None,
            "enqueued_at": 5.0,
        }
    )
    assert (queued.attempts, queued.failures, queued.available_at) == (2, ("boom",), 1.5)
    assert held.state is WorkState.CLAIMED  # the original is untouched


def test_a_queued_copy_of_an_item_with_no_availability_is_due_at_enqueue() -> None:
    item = WorkItem(id="x", tenant="t")
    queued = queued_copy(item, 7.0)
    assert (queued.enqueued_at, queued.available_at) == (7.0, 7.0)
    assert {"enqueued_at", "available_at", "state"} <= queued.model_fields_set
    assert item.model_fields_set == {"id", "tenant"}


def test_built_items_dump_pickle_and_copy_as_validated_ones_do() -> None:
    # The fast paths set pydantic's slots themselves: every way out of a model must work.
    validated = WorkItem(**FIELDS)  # type: ignore[arg-type]
    for built in (stored_item(dict(FIELDS)), queued_copy(validated, 5.0)):
        assert WorkItem.model_validate_json(built.model_dump_json()) == built
        assert pickle.loads(pickle.dumps(built)) == built
        assert copy.deepcopy(built) == built
        assert built.model_copy(update={"id": "z"}).id == "z"
        assert built.__pydantic_extra__ is None
        assert built.__pydantic_private__ is None
