"""`CheckpointerConformance` cases for records: first writer wins, fencing, `transact`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from durably.errors import Fenced
from durably.testing.checkpointer.fixtures import (
    LONG,
    CheckpointerFactory,
    claimed,
    lapse,
    wf,
)
from durably.testing.kit import EffectKit


class CheckpointerRecordCases:
    """Records are written once, by the current pass, and effects commit with them."""

    # --- records ---------------------------------------------------------------------------

    async def test_a_write_is_a_sign_of_life(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, 0.25)
        assert holder is not None
        for step in range(6):
            await asyncio.sleep(0.1)
            await cp.record(holder, f"step-{step}", step)
        assert await cp.claim(workflow, LONG, LONG) is None

    async def test_a_fenced_write_raises_writes_nothing_and_renews_nobody(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        new = await cp.claim(workflow, LONG, 0.4)
        assert new is not None
        await asyncio.sleep(0.25)
        with pytest.raises(Fenced) as raised:
            await cp.record(old, "late", "stale")
        assert raised.value.workflow == workflow
        assert raised.value.token == old.token
        assert await cp.load(workflow) == {}
        # Renewing the live pass would have kept it until ~0.65 s after its claim.
        await asyncio.sleep(0.3)
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_a_released_workflow_is_not_taken_back_by_a_write_in_flight(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.release(holder)
        written = await cp.record(holder, "in-flight", 1)
        assert written.first
        assert await cp.claim(workflow, LONG, LONG) is not None

    async def test_the_first_write_wins_and_the_loser_gets_the_winners_value(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "k", {"n": 1})
        assert (first.value, first.first) == ({"n": 1}, True)
        second = await cp.record(holder, "k", {"n": 2})
        assert (second.value, second.first) == ({"n": 1}, False)
        assert await cp.load(workflow) == {"k": {"n": 1}}

    async def test_a_later_pass_losing_a_write_gets_the_earlier_value(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await claimed(cp, workflow)
        await cp.record(old, "k", "old")
        await cp.release(old)
        new = await claimed(cp, workflow)
        lost = await cp.record(new, "k", "new")
        assert (lost.value, lost.first) == ("old", False)

    async def test_an_equal_value_counts_as_this_passes_own_write(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.record(holder, "k", {"b": 2, "a": 1})
        again = await cp.record(holder, "k", {"a": 1, "b": 2})
        assert (again.value, again.first) == ({"a": 1, "b": 2}, True)

    async def test_a_number_encoded_differently_is_not_an_equal_value(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for key, stored, other in (("int", 1, 1.0), ("float", 1.0, 1), ("zero", 0, -0.0)):
            assert cp.codec.encode(stored) != cp.codec.encode(other)
            await cp.record(holder, key, stored)
            lost = await cp.record(holder, key, other)
            assert (lost.value, type(lost.value), lost.first) == (stored, type(stored), False)
            supplied = await cp.supply(workflow, key, other)
            assert (supplied.value, supplied.first) == (stored, False)
            again = await cp.record(holder, key, stored)
            assert (again.value, type(again.value), again.first) == (stored, type(stored), True)

    async def test_a_float_comes_back_a_float_however_it_is_written(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        # 1e20 == 10**20 in Python: compare the JSON each renders, so a float written with
        # an exponent must not come back an int (PostgreSQL's jsonb printed it as one).
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        value = {"big": 1e20, "far": [1.7976931348623157e308, -1.5e300], "int": 10**20}
        expected = json.dumps(value, sort_keys=True)
        recorded = await cp.record(holder, "k", value)
        loaded = (await cp.load(workflow))["k"]
        supplied = await cp.supply(workflow, "input", 1e22)
        for got in (recorded.value, loaded):
            assert json.dumps(got, sort_keys=True) == expected
        assert (await cp.load(workflow))["input"] == supplied.value
        assert isinstance((await cp.load(workflow))["input"], float)
        assert (await cp.record(holder, "k", value)).first  # its own encoding still wins

    async def test_a_value_the_codec_reshapes_still_counts_as_this_passes_own(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "pair", (1, "two"))
        assert first.first
        assert first.value == cp.codec.decode(cp.codec.encode((1, "two")))
        again = await cp.record(holder, "pair", (1, "two"))
        assert again.first
        assert again.value == first.value

    async def test_json_null_is_a_recorded_value_that_is_never_replaced(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        first = await cp.record(holder, "nothing", None)
        assert (first.value, first.first) == (None, True)
        second = await cp.record(holder, "nothing", "something")
        assert (second.value, second.first) == (None, False)
        assert await cp.load(workflow) == {"nothing": None}

    async def test_racing_writes_of_one_key_leave_exactly_one_winner(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        results = await asyncio.gather(*(cp.record(holder, "k", n) for n in range(8)))
        assert sum(r.first for r in results) == 1
        winner = next(r.value for r in results if r.first)
        assert all(r.value == winner for r in results)
        assert await cp.load(workflow) == {"k": winner}

    async def test_load_keeps_first_recorded_order_not_key_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for key in ("b", "a", "c", "inbox-like", "A"):
            await cp.record(holder, key, key.upper())
        await cp.record(holder, "a", "loser")
        assert list((await cp.load(workflow)).items()) == [
            ("b", "B"),
            ("a", "A"),
            ("c", "C"),
            ("inbox-like", "INBOX-LIKE"),
            ("A", "A"),
        ]

    async def test_values_of_every_json_shape_round_trip(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        values: dict[str, object] = {
            "int": 7,
            "float": 2.5,
            "text": 'héllo 🚀 "quoted" {braces}; 100%',
            "list": [1, [2, None], {"x": True}],
            "dict": {"nested": {"deep": [False]}},
            "empty": "",
            "false": False,
        }
        for key, value in values.items():
            await cp.record(holder, key, value)
        assert await cp.load(workflow) == values

    # --- transact --------------------------------------------------------------------------

    async def test_transact_runs_its_effect_once_across_passes(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        first = await claimed(cp, workflow)
        done = await cp.transact(first, "pay", effect_kit.bump(counter, "paid"))
        assert (done.value, done.first) == ("paid", True)
        await cp.release(first)
        second = await claimed(cp, workflow)
        again = await cp.transact(second, "pay", effect_kit.bump(counter, "paid twice"))
        assert (again.value, again.first) == ("paid", False)
        assert await effect_kit.count(counter) == 1
        assert await cp.load(workflow) == {"pay": "paid"}

    @pytest.mark.parametrize("equal", [False, True], ids=["values apart", "one value"])
    async def test_racing_transacts_of_one_key_commit_one_effect(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any], equal: bool
    ) -> None:
        # An equal value is no licence to commit a second effect beside the first.
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        results = await asyncio.gather(
            *(
                cp.transact(holder, "pay", effect_kit.bump(counter, "paid" if equal else n))
                for n in range(8)
            )
        )
        assert await effect_kit.count(counter) == 1
        assert sum(r.first for r in results) == 1
        assert len({repr(r.value) for r in results}) == 1
        assert await cp.load(workflow) == {"pay": results[0].value}

    async def test_transact_refuses_a_superseded_pass_before_the_effect(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        old = await lapse(cp, workflow)
        await claimed(cp, workflow)
        with pytest.raises(Fenced):
            await cp.transact(old, "pay", effect_kit.bump(counter, "paid"))
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}

    async def test_a_failing_effect_leaves_neither_record_nor_counter(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        with pytest.raises(RuntimeError):
            await cp.transact(holder, "pay", effect_kit.bump_then_fail(counter))
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}
        retried = await cp.transact(holder, "pay", effect_kit.bump(counter, "paid"))
        assert retried.first
        assert await effect_kit.count(counter) == 1
