"""`CheckpointerConformance` cases for identifiers, arguments and workflow status."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.redaction import MAX_ERROR_CHARS, TRUNCATED_MARKER
from durably.stores.status import WorkflowStatus
from durably.testing.checkpointer.fixtures import (
    LONG,
    STRANGE_IDS,
    CheckpointerFactory,
    claimed,
    lapse,
    wf,
)
from durably.testing.refused import UNUSABLE_IDS


class CheckpointerStatusCases:
    """Ids address exactly themselves, bad arguments are refused, statuses list in id order."""

    # --- identifiers and arguments ---------------------------------------------------------

    async def test_strange_ids_address_exactly_themselves(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = uuid.uuid4().hex[:8]
        workflows = [f"{strange}{tag}" for strange in STRANGE_IDS] + [f"{tag}"]
        for n, workflow in enumerate(workflows):
            holder = await claimed(cp, workflow)
            for strange in STRANGE_IDS:
                await cp.record(holder, strange, [workflow, strange, n])
            await cp.set_status(holder, WorkflowStatus.SLEEPING, attempts=n)
        for n, workflow in enumerate(workflows):
            assert await cp.load(workflow) == {s: [workflow, s, n] for s in STRANGE_IDS}
            info = await cp.get_status(workflow)
            assert info is not None
            assert (info.workflow, info.attempts) == (workflow, n)
        assert [i.workflow for i in await cp.list_status()] == sorted(workflows)

    async def test_unusable_ids_are_refused(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        for bad in UNUSABLE_IDS:
            with pytest.raises(InvalidInputError):
                await cp.load(bad)
            with pytest.raises(InvalidInputError):
                await cp.claim(bad, LONG, LONG)
            with pytest.raises(InvalidInputError):
                await cp.record(holder, bad, 1)
            with pytest.raises(InvalidInputError):
                await cp.supply(bad, "k", 1)
            with pytest.raises(InvalidInputError):
                await cp.supply(workflow, bad, 1)
            with pytest.raises(InvalidInputError):
                await cp.append(bad, 1)
            with pytest.raises(InvalidInputError):
                await cp.history(bad)
            with pytest.raises(InvalidInputError):
                await cp.discard(bad)
            with pytest.raises(InvalidInputError):
                await cp.get_status(bad)
        assert await cp.load(workflow) == {}

    @pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
    async def test_non_positive_durations_are_refused(
        self, checkpointer_factory: CheckpointerFactory, bad: float
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        with pytest.raises(ValueError):
            await cp.claim(workflow, bad, LONG)
        with pytest.raises(ValueError):
            await cp.claim(workflow, LONG, bad)
        holder = await claimed(cp, workflow)
        with pytest.raises(ValueError):
            await cp.renew(holder, bad)
        with pytest.raises(ValueError):
            await cp.extend(holder, bad, LONG)
        with pytest.raises(ValueError):
            await cp.extend(holder, LONG, bad)
        assert await cp.claim(workflow, LONG, LONG) is None

    # --- status ----------------------------------------------------------------------------

    async def test_status_is_set_read_and_replaced(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        info = await cp.set_status(holder, WorkflowStatus.RUNNING)
        assert (info.workflow, info.status, info.attempts, info.last_error) == (
            workflow,
            WorkflowStatus.RUNNING,
            0,
            None,
        )
        assert info.updated_at.tzinfo is not None
        assert abs(datetime.now(UTC) - info.updated_at) < timedelta(minutes=1)
        failed = await cp.set_status(holder, WorkflowStatus.FAILED, attempts=3, error="boom 💥")
        assert await cp.get_status(workflow) == failed
        assert (failed.status, failed.attempts, failed.last_error) == (
            WorkflowStatus.FAILED,
            3,
            "boom 💥",
        )
        assert failed.updated_at >= info.updated_at

    async def test_a_huge_error_is_stored_cut_to_the_limit_with_a_marker(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        huge = "é" * (20 << 20)  # 20 Mi characters, 40 MiB of UTF-8
        failed = await cp.set_status(holder, WorkflowStatus.FAILED, error=huge)
        stored = await cp.get_status(workflow)
        assert stored == failed
        assert stored.last_error is not None
        assert len(stored.last_error) == MAX_ERROR_CHARS
        assert stored.last_error == huge[: MAX_ERROR_CHARS - len(TRUNCATED_MARKER)] + (
            TRUNCATED_MARKER
        )

    async def test_a_bad_status_report_is_refused_and_stores_nothing(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await claimed(cp, workflow)
        await cp.set_status(holder, WorkflowStatus.RUNNING, attempts=1)
        for status, attempts in (
            (WorkflowStatus.FAILED, -1),
            (WorkflowStatus.FAILED, True),
            (WorkflowStatus.FAILED, 1.5),
            ("finished", 1),
        ):
            with pytest.raises(InvalidInputError):
                await cp.set_status(holder, status, attempts=attempts)  # type: ignore[arg-type]
        info = await cp.get_status(workflow)
        assert info is not None
        assert (info.status, info.attempts) == (WorkflowStatus.RUNNING, 1)

    async def test_status_is_fenced_for_a_superseded_pass(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        old = await lapse(cp, workflow)
        new = await claimed(cp, workflow)
        await cp.set_status(new, WorkflowStatus.SLEEPING)
        with pytest.raises(Fenced):
            await cp.set_status(old, WorkflowStatus.COMPLETED)
        info = await cp.get_status(workflow)
        assert info is not None
        assert info.status is WorkflowStatus.SLEEPING

    async def test_status_lists_by_status_in_id_order_with_after_paging(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = uuid.uuid4().hex[:6]
        ids = [f"{tag}-{suffix}" for suffix in ("b", "B", "a", "é", "😀", "a b", "Z", "c")]
        for n, workflow in enumerate(ids):
            holder = await claimed(cp, workflow)
            status = WorkflowStatus.COMPLETED if n % 2 else WorkflowStatus.BLOCKED
            await cp.set_status(holder, status)
        everything = [i.workflow for i in await cp.list_status()]
        assert everything == sorted(ids)
        done = [i.workflow for i in await cp.list_status(status=WorkflowStatus.COMPLETED)]
        assert done == sorted(ids[1::2])
        assert all(
            i.status is WorkflowStatus.BLOCKED
            for i in await cp.list_status(status=WorkflowStatus.BLOCKED)
        )
        assert await cp.list_status(status=WorkflowStatus.RUNNING) == []
        pages: list[str] = []
        after: str | None = None
        while True:
            page = await cp.list_status(limit=3, after=after)
            if not page:
                break
            assert len(page) <= 3
            pages.extend(i.workflow for i in page)
            after = page[-1].workflow
        assert pages == sorted(ids)
        first_done = done[0]
        later = await cp.list_status(status=WorkflowStatus.COMPLETED, after=first_done, limit=2)
        assert [i.workflow for i in later] == done[1:3]

    async def test_workflows_lists_every_workflow_with_records_or_a_status_in_id_order(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        tag = uuid.uuid4().hex[:6]
        started = [f"{tag}-{s}" for s in ("b", "é", "{x}", "a b")]  # records, never run
        reported = [f"{tag}-{s}" for s in ("a", "😀", "*")]  # a status, no records
        both = f"{tag}-c"
        for workflow in [*started, both]:
            await cp.supply(workflow, "input", {"n": 1})
        for workflow in [*reported, both]:
            await cp.set_status(await claimed(cp, workflow), WorkflowStatus.RUNNING)
        everything = sorted([*started, *reported, both])
        listed = [w for w in await cp.workflows() if w.startswith(tag)]
        assert listed == everything
        later = await cp.workflows(after=everything[2], limit=10_000)
        assert [w for w in later if w.startswith(tag)] == everything[3:]
        assert len(await cp.workflows(after=tag, limit=2)) == 2
        await cp.discard(started[0])
        assert started[0] not in await cp.workflows(after=tag, limit=10_000)

    @pytest.mark.parametrize("bad", [{"limit": 0}, {"limit": 10_001}, {"after": ""}])
    async def test_workflows_refuses_a_bad_page_before_any_io(
        self, checkpointer_factory: CheckpointerFactory, bad: dict[str, object]
    ) -> None:
        cp = await checkpointer_factory()
        with pytest.raises(InvalidInputError):
            await cp.workflows(**bad)  # type: ignore[arg-type]
