"""The ready-set member of a Redis enqueue: order number, padding, and the id after it."""

from __future__ import annotations

from durably.redis.order import EnqueueOrder


def test_members_drawn_at_one_instant_sort_in_the_order_drawn() -> None:
    order = EnqueueOrder()
    members = [order.member(1000.0, item_id) for item_id in ("z", "b", "a")]
    assert sorted(members) == members


def test_members_drawn_while_the_clock_steps_back_still_sort_in_the_order_drawn() -> None:
    order = EnqueueOrder()
    members = [order.member(now, "x") for now in (3000.0, 2000.0, 1000.0)]
    assert sorted(members) == members
    assert len(set(members)) == 3


def test_a_member_is_sixteen_digits_of_microseconds_then_the_id() -> None:
    order = EnqueueOrder()
    assert order.member(1.5, "id:é") == "0000000001500000id:é"
    assert order.member(4_000_000_000.25, "b") == "4000000000250000b"


def test_a_reserved_run_of_numbers_sorts_between_the_members_drawn_around_it() -> None:
    order = EnqueueOrder()
    before = order.member(1000.0, "x")
    first = order.reserve(1000.0, 3)
    after = order.member(1000.0, "x")
    reserved = [f"{number:016d}x" for number in range(first, first + 3)]
    assert sorted([after, *reserved, before]) == [before, *reserved, after]
