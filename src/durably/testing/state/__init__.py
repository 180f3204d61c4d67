"""`StateStoreConformance`: the cases every `StateStore` must pass.

Subclass it in a ``Test*`` class and provide one fixture::

    class TestMyState(StateStoreConformance):
        @pytest.fixture
        def state_store_factory(self) -> Callable[[Clock], Awaitable[StateStore]]:
            async def make(clock: Clock) -> StateStore:
                return MyStateStore(clock=clock)  # over an empty, isolated namespace
            return make

Each factory call must return a store over an empty namespace; the subclass cleans up.
The suite brings its own ``clock`` (a `ManualClock`) and passes it to the factory.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import JsonValue

from durably.clock import ManualClock
from durably.errors import InvalidInputError, StateConflictError, StateNotFoundError
from durably.redaction import scrub
from durably.stores.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StateQuery,
    StateStore,
    ToolCall,
    Usage,
)
from durably.testing.state.fixtures import START, StateFixtures, StateStoreFactory, new_run
from durably.testing.state.isolation import StateIsolationCases
from durably.testing.state.listing import StateListingCases
from durably.testing.state.sessions import StateSessionCases
from durably.testing.state.totals import StateTotalsCases


class StateWriteCases(StateFixtures):
    """Compare-and-set writes, additive patches, round trips and redaction."""

    async def test_a_missing_run_reads_as_none(self, state_store: StateStore, tenant: str) -> None:
        assert await state_store.get_run(StateKey(tenant=tenant, id="nobody")) is None

    async def test_a_first_write_lands_at_version_one_stamped_with_the_clock(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        clock.advance(5)
        stored = await state_store.put_run(new_run(tenant, "r1"))
        assert stored.version == 1
        assert stored.updated_at == START + 5
        assert await state_store.get_run(StateKey(tenant=tenant, id="r1")) == stored

    async def test_each_write_advances_the_version_and_the_update_time(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        first = await state_store.put_run(new_run(tenant))
        clock.advance(3)
        second = await state_store.put_run(first.model_copy(update={"state": RunState.RUNNING}))
        assert (second.version, second.updated_at, second.state) == (
            2,
            START + 3,
            RunState.RUNNING,
        )
        assert await state_store.get_run(first.key) == second

    async def test_a_stale_write_is_refused_with_both_versions(
        self, state_store: StateStore, tenant: str
    ) -> None:
        first = await state_store.put_run(new_run(tenant))
        await state_store.put_run(first.model_copy(update={"iterations": 1}))
        with pytest.raises(StateConflictError) as refused:
            await state_store.put_run(first.model_copy(update={"iterations": 9}))
        assert (refused.value.expected_version, refused.value.actual_version) == (1, 2)
        stored = await state_store.get_run(first.key)
        assert stored is not None
        assert stored.iterations == 1

    async def test_a_create_over_an_existing_run_is_refused_with_both_versions(
        self, state_store: StateStore, tenant: str
    ) -> None:
        await state_store.put_run(new_run(tenant, "taken", agent_name="first"))
        with pytest.raises(StateConflictError) as refused:
            await state_store.put_run(new_run(tenant, "taken", agent_name="second"))
        assert (refused.value.expected_version, refused.value.actual_version) == (0, 1)
        stored = await state_store.get_run(StateKey(tenant=tenant, id="taken"))
        assert stored is not None
        assert stored.agent_name == "first"

    async def test_a_write_at_a_later_version_to_an_absent_run_is_refused(
        self, state_store: StateStore, tenant: str
    ) -> None:
        with pytest.raises(StateConflictError) as refused:
            await state_store.put_run(new_run(tenant, "ghost", version=3))
        assert (refused.value.expected_version, refused.value.actual_version) == (3, 0)
        assert await state_store.get_run(StateKey(tenant=tenant, id="ghost")) is None

    async def test_of_twenty_concurrent_creates_exactly_one_wins(
        self, state_store: StateStore, tenant: str
    ) -> None:
        attempts = [new_run(tenant, "contested", agent_name=f"agent-{n}") for n in range(20)]
        results = await asyncio.gather(
            *(state_store.put_run(run) for run in attempts), return_exceptions=True
        )
        winners = [r for r in results if isinstance(r, RunRecord)]
        losers = [r for r in results if isinstance(r, StateConflictError)]
        assert (len(winners), len(losers)) == (1, 19)
        assert await state_store.get_run(StateKey(tenant=tenant, id="contested")) == winners[0]

    async def test_of_twenty_concurrent_updates_from_one_read_exactly_one_wins(
        self, state_store: StateStore, tenant: str
    ) -> None:
        base = await state_store.put_run(new_run(tenant))
        results = await asyncio.gather(
            *(state_store.put_run(base.model_copy(update={"iterations": n})) for n in range(20)),
            return_exceptions=True,
        )
        winners = [r for r in results if isinstance(r, RunRecord)]
        assert len(winners) == 1
        assert all(isinstance(r, StateConflictError | RunRecord) for r in results)
        assert await state_store.get_run(base.key) == winners[0]

    async def test_a_deleted_run_can_be_created_again_from_version_zero(
        self, state_store: StateStore, tenant: str
    ) -> None:
        first = await state_store.put_run(new_run(tenant))
        assert await state_store.delete_run(first.key) is True
        assert await state_store.get_run(first.key) is None
        again = await state_store.put_run(new_run(tenant, first.run_id))
        assert again.version == 1

    async def test_deleting_an_absent_run_returns_false(
        self, state_store: StateStore, tenant: str
    ) -> None:
        assert await state_store.delete_run(StateKey(tenant=tenant, id="never")) is False

    async def test_a_patch_adds_to_every_counter_and_bumps_the_version(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        usage = Usage(
            input_tokens=1,
            output_tokens=2,
            cached_tokens=3,
            cache_write_tokens=4,
            reasoning_tokens=5,
            requests=6,
            tool_calls=7,
        )
        run = new_run(tenant, usage=usage, cost_micros=10, iterations=1, message_cursor=2)
        stored = await state_store.put_run(run)
        clock.advance(2)
        delta = StateDelta(usage=usage, cost_micros=5, iterations=2, messages_read=3)
        merged = await state_store.patch_run(stored.key, delta)
        assert merged.usage == usage + usage
        assert (merged.cost_micros, merged.iterations, merged.message_cursor) == (15, 3, 5)
        assert (merged.version, merged.updated_at) == (2, START + 2)
        assert await state_store.get_run(stored.key) == merged

    async def test_a_patch_leaves_every_other_field_as_it_was(
        self, state_store: StateStore, tenant: str
    ) -> None:
        run = new_run(
            tenant,
            state=RunState.SUSPENDED,
            awaiting_approval="call-1",
            metadata={"k": [1, "two"]},
            pending_tool_calls=(ToolCall(id="call-1", name="search", arguments={"q": "x"}),),
        )
        stored = await state_store.put_run(run)
        merged = await state_store.patch_run(stored.key, StateDelta(iterations=1))
        assert merged.model_copy(update={"iterations": 0, "version": 1}) == stored.model_copy(
            update={"updated_at": merged.updated_at}
        )

    async def test_twenty_concurrent_patches_all_land(
        self, state_store: StateStore, tenant: str
    ) -> None:
        stored = await state_store.put_run(new_run(tenant))
        delta = StateDelta(
            usage=Usage(input_tokens=10, output_tokens=1, reasoning_tokens=2),
            cost_micros=7,
            iterations=1,
            messages_read=2,
        )
        await asyncio.gather(*(state_store.patch_run(stored.key, delta) for _ in range(20)))
        final = await state_store.get_run(stored.key)
        assert final is not None
        assert final.usage == Usage(input_tokens=200, output_tokens=20, reasoning_tokens=40)
        assert (final.cost_micros, final.iterations, final.message_cursor) == (140, 20, 40)
        assert final.version == 21

    async def test_a_patch_makes_a_write_from_an_earlier_read_conflict(
        self, state_store: StateStore, tenant: str
    ) -> None:
        read = await state_store.put_run(new_run(tenant))
        await state_store.patch_run(read.key, StateDelta(cost_micros=1))
        with pytest.raises(StateConflictError) as refused:
            await state_store.put_run(read.model_copy(update={"state": RunState.COMPLETED}))
        assert (refused.value.expected_version, refused.value.actual_version) == (1, 2)

    async def test_patching_an_absent_run_raises_not_found(
        self, state_store: StateStore, tenant: str
    ) -> None:
        key = StateKey(tenant=tenant, id="absent")
        with pytest.raises(StateNotFoundError):
            await state_store.patch_run(key, StateDelta(iterations=1))
        assert await state_store.get_run(key) is None

    async def test_a_counter_past_a_signed_64_bit_integer_is_refused_and_changes_nothing(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # PostgreSQL's bigint and Redis's HINCRBY hold a signed 64-bit integer; every
        # backing refuses a larger counter alike instead of keeping it on some of them.
        top = 2**63 - 1
        for fields in (
            {"usage": Usage(cached_tokens=top + 1)},
            {"cost_micros": top + 1},
            {"iterations": top + 1},
            {"message_cursor": top + 1},
        ):
            with pytest.raises(InvalidInputError):
                await state_store.put_run(new_run(tenant, "fresh", **fields))
        assert await state_store.get_run(StateKey(tenant=tenant, id="fresh")) is None
        full = await state_store.put_run(
            new_run(tenant, "full", usage=Usage(output_tokens=top), cost_micros=1)
        )
        for delta in (
            StateDelta(usage=Usage(input_tokens=1, output_tokens=1), cost_micros=1),
            StateDelta(cost_micros=top),
            StateDelta(iterations=top + 1),
            StateDelta(usage=Usage(requests=top + 1)),
        ):
            with pytest.raises(InvalidInputError):
                await state_store.patch_run(full.key, delta)
        assert await state_store.get_run(full.key) == full
        patched = await state_store.patch_run(full.key, StateDelta(cost_micros=top - 1))
        assert (patched.cost_micros, patched.usage.output_tokens) == (top, top)

    async def test_every_field_survives_a_round_trip(
        self, state_store: StateStore, tenant: str
    ) -> None:
        run = new_run(
            tenant,
            agent_name="researcher",
            session_id="s-1",
            state=RunState.SUSPENDED,
            message_cursor=12,
            pending_tool_calls=(
                ToolCall(id="c1", name="fetch", arguments={"url": "https://x.test", "n": 3}),
                ToolCall(
                    id="c2",
                    name="pay",
                    arguments={"nested": {"list": [1, 2.5, None, True]}},
                    idempotent=True,
                ),
            ),
            usage=Usage(
                input_tokens=11,
                output_tokens=22,
                cached_tokens=33,
                cache_write_tokens=44,
                reasoning_tokens=55,
                requests=66,
                tool_calls=77,
            ),
            cost_micros=123_456_789,
            iterations=8,
            awaiting_approval="c2",
            metadata={"unicode": "héllo ✓ 🚀", "deep": {"a": [1, {"b": None}]}, "f": 0.25},
        )
        stored = await state_store.put_run(run)
        read = await state_store.get_run(run.key)
        assert read == stored
        assert read is not None
        assert read.model_copy(update={"version": 0, "updated_at": 0.0}) == run

    async def test_a_negative_zero_is_stored_as_zero_and_answered_so(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # PostgreSQL's jsonb has no -0.0: every backing stores zero, and answers the write
        # with what a later read gives back.
        document: dict[str, JsonValue] = {"z": -0.0, "deep": [{"z": -0.0}], "text": "-0.0"}
        zero: dict[str, JsonValue] = {"z": 0.0, "deep": [{"z": 0.0}], "text": "-0.0"}
        run = new_run(
            tenant,
            metadata=document,
            pending_tool_calls=(ToolCall(id="c", name="n", arguments=document),),
        )
        stored = await state_store.put_run(run)
        read = await state_store.get_run(run.key)
        assert read is not None
        session = SessionRecord(session_id="s", tenant=tenant, metadata=document)
        answered = await state_store.put_session(session)
        kept = await state_store.get_session(session.key)
        assert kept is not None
        documents = [stored.metadata, read.metadata, answered.metadata, kept.metadata]
        documents += [stored.pending_tool_calls[0].arguments, read.pending_tool_calls[0].arguments]
        for got in documents:
            assert json.dumps(got, sort_keys=True) == json.dumps(zero, sort_keys=True)

    async def test_a_float_comes_back_a_float_of_the_same_value_however_it_is_written(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # 1e20 == 10**20 in Python, so compare the JSON each renders: an integral float
        # written with an exponent must not come back an int (nor an int as a float).
        numbers: list[object] = [1e20, -1.5e300, 1e16, 1.7976931348623157e308, 2.0, 0.1]
        numbers += [1e-7, 5e-324, -2.5, 10**20, 7]
        document: dict[str, JsonValue] = {"n": numbers, "deep": {"x": [1e22]}}  # type: ignore[dict-item]
        run = new_run(
            tenant,
            session_id="s",
            metadata=document,
            pending_tool_calls=(ToolCall(id="c", name="n", arguments=document),),
        )
        stored = await state_store.put_run(run)
        patched = await state_store.patch_run(run.key, StateDelta(iterations=1))
        read = await state_store.get_run(run.key)
        listed = (await state_store.list_runs(StateQuery(tenant=tenant))).records
        assert read is not None
        assert len(listed) == 1
        expected = json.dumps(document, sort_keys=True)
        for record in (stored, patched, read, listed[0]):
            assert json.dumps(record.metadata, sort_keys=True) == expected
            arguments = record.pending_tool_calls[0].arguments
            assert json.dumps(arguments, sort_keys=True) == expected
        session = SessionRecord(session_id="s", tenant=tenant, metadata=document)
        await state_store.put_session(session)
        kept = await state_store.get_session(session.key)
        assert kept is not None
        assert json.dumps(kept.metadata, sort_keys=True) == expected

    async def test_tool_call_arguments_are_stored_as_given_for_the_loop_to_run(
        self, state_store: StateStore, tenant: str
    ) -> None:
        arguments: dict[str, JsonValue] = {
            "to": "bob@example.com",
            "page_token": "tok-2",
            "path": "/v1/items?token=page-2",
            "n": 1,
        }
        call = ToolCall(id="c1", name="send", arguments=arguments)
        returned = await state_store.put_run(new_run(tenant, pending_tool_calls=[call]))
        stored = await state_store.get_run(returned.key)
        assert stored is not None
        for record in (returned, stored):
            assert record.pending_tool_calls[0].arguments == arguments
            assert record.masked_paths == ()
            assert not record.masked("c1")

    async def test_a_scrubbing_store_masks_arguments_and_names_the_masked_paths(
        self, state_store_factory: StateStoreFactory, clock: ManualClock, tenant: str
    ) -> None:
        store = await state_store_factory(clock, scrub)
        try:
            secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
            call = ToolCall(
                id="c1",
                name="send",
                arguments={"api_key": secret, "to": ["someone@example.com"], "n": 1},
            )
            plain = ToolCall(id="c2", name="read", arguments={"n": 2})
            returned = await store.put_run(new_run(tenant, pending_tool_calls=(call, plain)))
            stored = await store.get_run(returned.key)
            assert stored is not None
            for record in (returned, stored):
                text = record.model_dump_json()
                assert secret not in text
                assert "someone@example.com" not in text
                assert record.pending_tool_calls[0].arguments["n"] == 1
                assert record.masked_paths == (
                    "pending_tool_calls['c1'].arguments.api_key",
                    "pending_tool_calls['c1'].arguments.to[0]",
                )
                assert record.masked("c1")
                assert not record.masked("c2")
        finally:
            await store.close()

    async def test_changing_a_returned_record_does_not_change_the_stored_one(
        self, state_store: StateStore, tenant: str
    ) -> None:
        stored = await state_store.put_run(new_run(tenant, metadata={"tags": ["a"]}))
        read = await state_store.get_run(stored.key)
        assert read is not None
        read.metadata["injected"] = True
        stored.metadata["injected"] = True
        again = await state_store.get_run(stored.key)
        assert again is not None
        assert again.metadata == {"tags": ["a"]}


class StateStoreConformance(
    StateWriteCases, StateSessionCases, StateListingCases, StateIsolationCases, StateTotalsCases
):
    """Every case a `StateStore` must pass; provide ``state_store_factory``."""


__all__ = ["StateStoreConformance", "StateStoreFactory"]
