"""The rules every backing applies to workflow gates: the line's rotation and the
throttle's reserved slots (`durably.stores.gates`)."""

from __future__ import annotations

import pytest

from durably.errors import ConfigurationError
from durably.memory import MemoryCheckpointer
from durably.stores.gates import GateLine, gating, throttled_until


def test_a_throttle_spaces_starts_from_the_first_and_lets_a_burst_through_after_quiet() -> None:
    tat = None
    begins = []
    for _ in range(3):  # three starts at once, 10 s apart at the steady rate
        at, tat = throttled_until(tat, 100.0, 10.0, 1)
        begins.append(at)
    assert begins == [100.0, 110.0, 120.0]
    # After a quiet spell a burst of 3 begins at once, the fourth a slot later.
    tat = None
    at, tat = throttled_until(tat, 0.0, 10.0, 3)
    assert at == 0.0  # no burst at first use: the bucket starts full
    now = 1000.0
    burst = []
    for _ in range(4):
        at, tat = throttled_until(tat, now, 10.0, 3)
        burst.append(at)
    assert burst == [now, now, now, now + 10.0]


def test_the_line_admits_the_tenant_served_longest_ago_first() -> None:
    line = GateLine(limit=1)
    line.serve("noisy")  # admitted directly
    line.queued = {
        "noisy": [(-20, 1, "n1", "k"), (-20, 2, "n2", "k")],
        "quiet": [(-20, 3, "q1", "k")],
    }
    assert line.next_tenant() == "quiet"  # never admitted: turn 0
    line.queued["quiet"].pop(0)
    line.serve("quiet")
    assert line.next_tenant() == "noisy"
    line.queued["quiet"] = [(-20, 4, "q2", "k")]
    line.serve("noisy")
    assert line.next_tenant() == "quiet"  # noisy was served last
    assert GateLine(limit=1).next_tenant() is None


def test_between_tenants_of_one_turn_the_higher_priority_head_goes_first() -> None:
    line = GateLine(limit=1)
    line.queued = {"old": [(-10, 1, "o1", "k")], "urgent": [(-40, 2, "u1", "k")]}
    assert line.next_tenant() == "urgent"  # both never admitted: priority, then age
    line.serve("urgent")
    assert line.next_tenant() == "old"  # a turn still outranks a priority


def test_a_checkpointer_that_cannot_gate_refuses_a_gated_kind_naming_it() -> None:
    class Plain:  # a third-party checkpointer without the capability
        pass

    with pytest.raises(ConfigurationError, match=r"workflow 'billing'.*concurrency= and throttle="):
        gating(Plain(), "billing")  # type: ignore[arg-type]
    store = MemoryCheckpointer()
    assert gating(store, "billing") is store
