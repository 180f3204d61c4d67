"""`CheckpointerConformance` cases for near ids, refused input and the budget's bound."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Pass
from durably.testing.checkpointer.fixtures import LONG, CheckpointerFactory, claimed, wf
from durably.testing.kit import EffectKit
from durably.testing.refused import UNSTORABLE_TEXTS, UNUSABLE_IDS

# Suffixes where one id is a prefix, a glob or a pattern of another: a store that matched
# keys by pattern or joined segments with a separator would confuse them.
NEAR = ("", ":", "*", "?", "[ab]", "%", "_", "{x}", " ", ":y", "}", "{")


class CheckpointerIsolationCases:
    """Every workflow id and step key addresses exactly itself; bad input is refused."""

    async def test_near_ids_keep_their_own_records_status_and_discard(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any]
    ) -> None:
        cp = await checkpointer_factory()
        base = f"w{uuid.uuid4().hex[:8]}"
        workflows = [base + suffix for suffix in NEAR]
        counter = wf("counter")
        holders: dict[str, Pass] = {}
        for workflow in workflows:
            holder = await claimed(cp, workflow)
            holders[workflow] = holder
            for suffix in NEAR:
                await cp.record(holder, f"k{suffix}", [workflow, suffix])
            await cp.transact(holder, f"pay{NEAR[2]}", effect_kit.bump(counter, workflow))
            await cp.supply(workflow, "input:", workflow)
            await cp.append(workflow, workflow)
            await cp.set_status(holder, WorkflowStatus.RUNNING, error=workflow)
        assert await effect_kit.count(counter) == len(workflows)
        doomed = base + "*"
        assert await cp.discard(doomed) == len(NEAR) + 3
        for workflow in workflows:
            loaded = await cp.load(workflow)
            history = await cp.history(workflow)
            info = await cp.get_status(workflow)
            if workflow == doomed:
                assert (loaded, history, info) == ({}, {}, None)
                continue
            assert list(history) == list(loaded)
            assert {key: written.value for key, written in history.items()} == loaded
            for written in history.values():  # supplied, appended and transacted too
                assert written.at.utcoffset() == timedelta(0)
                assert abs(datetime.now(UTC) - written.at) < timedelta(minutes=1)
            assert [loaded[f"k{suffix}"] for suffix in NEAR] == [[workflow, s] for s in NEAR]
            assert (loaded["pay*"], loaded["input:"]) == (workflow, workflow)
            inbox = [value for key, value in loaded.items() if key.startswith("inbox:")]
            assert inbox == [workflow]
            assert info is not None
            assert (info.workflow, info.last_error) == (workflow, workflow)
            assert await cp.renew(holders[workflow], LONG)
        listed = [info.workflow for info in await cp.list_status()]
        assert listed == sorted(w for w in workflows if w != doomed)

    async def test_writes_cannot_carry_a_pass_past_its_budget(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, 0.4, 0.2)
        assert holder is not None
        started, step = time.monotonic(), 0
        while time.monotonic() - started < 0.6:
            await cp.record(holder, f"step-{step}", step)
            step += 1
            await asyncio.sleep(0.05)
        assert await cp.claim(workflow, LONG, LONG) is not None

    @pytest.mark.parametrize("bad", UNUSABLE_IDS)
    async def test_every_entry_point_refuses_an_unusable_id_and_writes_nothing(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any], bad: str
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        stranger = Pass(bad, holder.token)
        with pytest.raises(InvalidInputError):
            await cp.claim(bad, LONG, LONG)
        with pytest.raises(InvalidInputError):
            await cp.renew(stranger, LONG)
        with pytest.raises(InvalidInputError):
            await cp.extend(stranger, LONG, LONG)
        with pytest.raises(InvalidInputError):
            await cp.release(stranger)
        with pytest.raises(InvalidInputError):
            await cp.record(stranger, "k", 1)
        with pytest.raises(InvalidInputError):
            await cp.record(holder, bad, 1)
        with pytest.raises(InvalidInputError):
            await cp.transact(stranger, "k", effect_kit.bump(counter, 1))
        with pytest.raises(InvalidInputError):
            await cp.transact(holder, bad, effect_kit.bump(counter, 1))
        with pytest.raises(InvalidInputError):
            await cp.set_status(stranger, WorkflowStatus.RUNNING)
        with pytest.raises(InvalidInputError):
            await cp.supply(bad, "k", 1)
        with pytest.raises(InvalidInputError):
            await cp.supply(workflow, bad, 1)
        with pytest.raises(InvalidInputError):
            await cp.append(bad, 1)
        with pytest.raises(InvalidInputError):
            await cp.load(bad)
        with pytest.raises(InvalidInputError):
            await cp.history(bad)
        with pytest.raises(InvalidInputError):
            await cp.get_status(bad)
        with pytest.raises(InvalidInputError):
            await cp.discard(bad)
        with pytest.raises(InvalidInputError):
            await cp.list_status(after=bad)
        assert await effect_kit.count(counter) == 0
        assert await cp.load(workflow) == {}
        assert await cp.list_status() == []
        assert await cp.renew(holder, LONG)

    @pytest.mark.parametrize("bad", UNSTORABLE_TEXTS)
    async def test_a_value_holding_text_no_backing_can_store_is_refused_and_writes_nothing(
        self, checkpointer_factory: CheckpointerFactory, effect_kit: EffectKit[Any], bad: str
    ) -> None:
        cp = await checkpointer_factory()
        workflow, counter = wf(), wf("counter")
        holder = await claimed(cp, workflow)
        await cp.record(holder, "kept", {"k": "v"})
        before = await cp.load(workflow)
        for value in (bad, {"k": bad}, {bad: 1}, [1, None, {"deep": [bad]}]):
            with pytest.raises(InvalidInputError):
                await cp.record(holder, "step", value)
            with pytest.raises(InvalidInputError):
                await cp.transact(holder, "paid", effect_kit.bump(counter, value))
            with pytest.raises(InvalidInputError):
                await cp.supply(workflow, "input", value)
            with pytest.raises(InvalidInputError):
                await cp.append(workflow, value)
        assert await cp.load(workflow) == before == {"kept": {"k": "v"}}
        assert await effect_kit.count(counter) == 0
        assert await cp.renew(holder, LONG)
        # Text that merely looks like an escape is stored as it is.
        looks = ["\\u0000", "\\ud800", "\\", "\\\\u0000", "é \\ud83d\\ude80 🚀"]
        assert (await cp.record(holder, "looks", looks)).value == looks
        entry = await cp.append(workflow, looks)
        assert (await cp.load(workflow))[entry.key] == looks

    @pytest.mark.parametrize("bad", UNSTORABLE_TEXTS)
    async def test_a_status_error_no_backing_can_store_is_kept_with_replacement_characters(
        self, checkpointer_factory: CheckpointerFactory, bad: str
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        error = f"RuntimeError({bad}) at 🚀"
        mended = "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in error)
        info = await cp.set_status(holder, WorkflowStatus.FAILED, attempts=1, error=error)
        assert info.last_error == mended
        stored = await cp.get_status(workflow)
        assert stored is not None
        assert (stored.status, stored.last_error) == (WorkflowStatus.FAILED, mended)

    @pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
    async def test_every_duration_that_is_not_positive_is_refused_by_name(
        self, checkpointer_factory: CheckpointerFactory, bad: float
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        with pytest.raises(ValueError, match="budget"):
            await cp.claim(workflow, bad, LONG)
        with pytest.raises(ValueError, match="alive"):
            await cp.claim(workflow, LONG, bad)
        holder = await claimed(cp, workflow)
        with pytest.raises(ValueError, match="alive"):
            await cp.renew(holder, bad)
        with pytest.raises(ValueError, match="budget"):
            await cp.extend(holder, bad, LONG)
        with pytest.raises(ValueError, match="alive"):
            await cp.extend(holder, LONG, bad)


__all__ = ["NEAR", "CheckpointerIsolationCases"]
