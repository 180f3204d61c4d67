"""`durably.redis.queue`'s item reading: the fast paths build what validation would."""

from __future__ import annotations

from typing import Any

import pytest

from durably.redis.queue import _item
from durably.stores.work import WorkItem, WorkPriority, WorkState


def _fields(**changes: Any) -> list[Any]:
    fields: list[Any] = [
        b'{"k":"v"}',  # payload
        b"2",  # attempts
        b"claimed",  # state
        b"w1",  # worker
        b"100.5",  # enqueued_at
        b"101.25",  # available_at
        b"130.0",  # lease_expires_at
        b"101.5",  # first_claimed_at
        b"102.0",  # claimed_at
        b"4:boom5:again",  # failures
        b"jobs",  # queue
        b"key",  # dedupe
        b"t:1",  # tenant
        b"id {x}",  # id
        b"30",  # priority
        b"0000000000000007id {x}",  # member
        None,  # concurrency_key (no flow gates)
        None,  # concurrency_limit
        None,  # throttle_key
        None,  # throttle_seconds
        None,  # throttle_burst
    ]
    names = ["payload", "attempts", "state", "worker", "enqueued", "available", "lease"]
    names += ["first", "claimed", "failures", "queue", "dedupe", "tenant", "id", "priority"]
    names += ["member", "ckey", "climit", "tkey", "tseconds", "tburst"]
    for name, value in changes.items():
        fields[names.index(name)] = value
    return fields


EXPECTED = WorkItem(
    id="id {x}",
    tenant="t:1",
    queue="jobs",
    payload={"k": "v"},
    priority=WorkPriority.HIGH,
    dedupe_key="key",
    attempts=2,
    state=WorkState.CLAIMED,
    worker="w1",
    enqueued_at=100.5,
    available_at=101.25,
    lease_expires_at=130.0,
    first_claimed_at=101.5,
    claimed_at=102.0,
    failures=("boom", "again"),
)


def test_an_item_read_back_equals_the_validated_item() -> None:
    item = _item(_fields())
    assert item == EXPECTED
    assert item.model_fields_set == set(WorkItem.model_fields)


def test_an_item_under_flow_gates_reads_back_its_gates() -> None:
    fields = _fields(ckey=b"k", climit=b"2", tkey=b"api", tseconds=b"0.02", tburst=b"5")
    assert _item(fields) == EXPECTED.model_copy(
        update={
            "concurrency_key": "k",
            "concurrency_limit": 2,
            "throttle_key": "api",
            "throttle_seconds": 0.02,
            "throttle_burst": 5,
        }
    )


def test_text_replies_take_the_general_path_to_the_same_item() -> None:
    text = [value.decode() if isinstance(value, bytes) else value for value in _fields()]
    assert _item(text) == EXPECTED


@pytest.mark.parametrize("state", list(WorkState))
@pytest.mark.parametrize("priority", list(WorkPriority))
def test_every_state_and_priority_reads_back_as_itself(
    state: WorkState, priority: WorkPriority
) -> None:
    item = _item(_fields(state=state.value.encode(), priority=str(int(priority)).encode()))
    assert (item.state, item.priority) == (state, priority)


def test_unset_fields_read_as_a_fresh_item_due_at_its_enqueue() -> None:
    item = _item(
        _fields(
            payload=b"{}",
            attempts=None,
            state=b"queued",
            worker=None,
            available=None,
            lease=None,
            first=None,
            claimed=None,
            failures=None,
            dedupe=None,
        )
    )
    assert item.payload == {}
    assert (item.attempts, item.available_at, item.enqueued_at) == (0, 100.5, 100.5)
    assert (item.worker, item.dedupe_key, item.failures) == (None, None, ())


def test_items_built_from_one_template_share_nothing_mutable() -> None:
    first, second = _item(_fields()), _item(_fields(payload=b"{}"))
    assert first.payload == {"k": "v"}
    assert second.payload == {}
    assert first.failures == ("boom", "again")
