"""`ClaimCheckStoreConformance`: the cases every `ClaimCheckStore` must pass, alone and
behind a `ClaimCheckPolicy`.

Subclass it in a ``Test*`` class and provide three fixtures::

    class TestMyClaims(ClaimCheckStoreConformance):
        @pytest.fixture
        def claim_store_factory(self) -> ClaimCheckStoreFactory:
            async def make(clock: Clock) -> ClaimCheckStore:
                return MyClaimCheckStore(clock=clock)  # over an empty, isolated namespace
            return make

plus ``checkpointer_factory`` and ``work_queue_factory`` as `CheckpointerConformance` and
`WorkQueueConformance` take them (the stores the policy cases put large values through).
The suite brings its own ``clock`` (a `ManualClock`) and passes it to the factory.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably.claimcheck.policy import PAYLOAD_MANIFEST, VALUE_MARK, ClaimCheckPolicy
from durably.claimcheck.store import ClaimCheckStore
from durably.claimcheck.wrappers import ClaimCheckedCheckpointer, ClaimCheckedQueue
from durably.clock import Clock, ManualClock
from durably.engine.runtime import Execution, advance
from durably.errors import ClaimUnavailableError, InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.work import QueuePolicy, WorkItem
from durably.stores.workflows import Completed
from durably.testing.checkpointer.fixtures import CheckpointerFactory
from durably.testing.queue.fixtures import WorkQueueFactory
from durably.testing.state.fixtures import START, unique

ClaimCheckStoreFactory = Callable[[Clock], Awaitable[ClaimCheckStore]]

FIVE_MB = 5 * 1024 * 1024
_BAD_HANDLES: list[object] = [
    "claim:abc",
    "claim:" + "A" * 64,
    "CLAIM:" + "a" * 64,
    "claim:" + "a" * 65,
    " claim:" + "a" * 64,
    "claim:" + "a" * 64 + "\n",
    "",
    None,
    64,
    b"claim:" + b"a" * 64,
]


_BAD_DATA: list[Any] = [123, None, 1.5, ["a"], {"a": "b"}, "lone \ud800"]
_BAD_TTLS: list[Any] = [0, -1, math.nan, math.inf, "10", True]


def big_text(size: int) -> str:
    """``size`` characters that do not repeat (hex of random bytes)."""
    return os.urandom(size // 2 + 1).hex()[:size]


class ClaimCheckStoreConformance:
    """Content-addressed blobs with a time to live, and the policy that sends large
    checkpointed values and payload fields behind them."""

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock(START)

    @pytest.fixture
    async def claim_store(
        self, claim_store_factory: ClaimCheckStoreFactory, clock: ManualClock
    ) -> ClaimCheckStore:
        return await claim_store_factory(clock)

    # --- the store ---------------------------------------------------------------------

    async def test_a_put_blob_comes_back_under_its_content_hash_text_as_utf8(
        self, claim_store: ClaimCheckStore
    ) -> None:
        data = bytes(range(256)) * 3
        handle = await claim_store.put(data)
        assert handle == "claim:" + hashlib.sha256(data).hexdigest()
        assert await claim_store.fetch(handle) == data
        assert await claim_store.fetch(await claim_store.put("caf\u00e9 \U0001f600")) == (
            "caf\u00e9 \U0001f600".encode()
        )
        assert await claim_store.fetch(await claim_store.put(b"")) == b""

    async def test_two_equal_payloads_share_one_stored_blob(
        self, claim_store: ClaimCheckStore
    ) -> None:
        first = await claim_store.put(b"same payload")
        second = await claim_store.put("same payload")
        other = await claim_store.put(b"another payload")
        assert first == second != other
        assert await claim_store.held() == 2
        assert await claim_store.forget(first) is True
        with pytest.raises(ClaimUnavailableError):
            await claim_store.fetch(second)

    async def test_an_expired_handle_raises_claim_unavailable(
        self, claim_store: ClaimCheckStore, clock: ManualClock
    ) -> None:
        handle = await claim_store.put(b"short-lived", ttl=10)
        clock.advance(9.5)
        assert await claim_store.fetch(handle) == b"short-lived"
        clock.advance(0.5)
        with pytest.raises(ClaimUnavailableError) as raised:
            await claim_store.fetch(handle)
        assert raised.value.reason == "expired"
        assert raised.value.handle == handle
        assert raised.value.retryable is False

    async def test_putting_equal_data_again_never_shortens_its_life_and_revives_it(
        self, claim_store: ClaimCheckStore, clock: ManualClock
    ) -> None:
        handle = await claim_store.put(b"kept", ttl=100)
        assert await claim_store.put(b"kept", ttl=10) == handle
        clock.advance(50)
        assert await claim_store.fetch(handle) == b"kept"
        await claim_store.put(b"kept", ttl=100)  # now lives to START + 150
        clock.advance(90)
        assert await claim_store.fetch(handle) == b"kept"
        await claim_store.put(b"kept")  # and now until forgotten
        clock.advance(10_000)
        assert await claim_store.fetch(handle) == b"kept"
        handle = await claim_store.put(b"again", ttl=1)
        clock.advance(2)
        assert await claim_store.put(b"again", ttl=5) == handle
        assert await claim_store.fetch(handle) == b"again"

    async def test_a_handle_never_put_or_forgotten_is_missing(
        self, claim_store: ClaimCheckStore
    ) -> None:
        never = "claim:" + hashlib.sha256(unique("never").encode()).hexdigest()
        with pytest.raises(ClaimUnavailableError) as raised:
            await claim_store.fetch(never)
        assert raised.value.reason == "missing"
        assert await claim_store.forget(never) is False
        handle = await claim_store.put(b"gone soon")
        assert await claim_store.forget(handle) is True
        assert await claim_store.forget(handle) is False
        with pytest.raises(ClaimUnavailableError, match="missing"):
            await claim_store.fetch(handle)

    async def test_purge_drops_only_expired_blobs(
        self, claim_store: ClaimCheckStore, clock: ManualClock
    ) -> None:
        await claim_store.put(b"brief", ttl=10)
        lasting = await claim_store.put(b"lasting", ttl=1000)
        forever = await claim_store.put(b"forever")
        assert await claim_store.purge() == 0
        clock.advance(20)
        assert await claim_store.purge() == 1
        assert await claim_store.held() == 2
        assert await claim_store.fetch(lasting) == b"lasting"
        assert await claim_store.fetch(forever) == b"forever"

    async def test_data_neither_bytes_nor_text_or_a_bad_ttl_is_refused_before_io(
        self, claim_store: ClaimCheckStore
    ) -> None:
        for data in _BAD_DATA:
            with pytest.raises(InvalidInputError):
                await claim_store.put(data)
        for ttl in _BAD_TTLS:
            with pytest.raises(InvalidInputError):
                await claim_store.put(b"data", ttl=ttl)
        assert await claim_store.held() == 0

    async def test_a_handle_of_the_wrong_shape_is_refused_before_io(
        self, claim_store: ClaimCheckStore
    ) -> None:
        for handle in _BAD_HANDLES:
            with pytest.raises(InvalidInputError):
                await claim_store.fetch(handle)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError):
                await claim_store.forget(handle)  # type: ignore[arg-type]

    async def test_close_is_idempotent(self, claim_store: ClaimCheckStore) -> None:
        handle = await claim_store.put(b"before close")
        await claim_store.close()
        await claim_store.close()
        assert handle.startswith("claim:")

    # --- behind the policy -------------------------------------------------------------

    async def test_a_5_mb_step_value_round_trips_through_the_policy(
        self, claim_store: ClaimCheckStore, checkpointer_factory: CheckpointerFactory
    ) -> None:
        inner = await checkpointer_factory()
        checkpointer = ClaimCheckedCheckpointer(inner, ClaimCheckPolicy(claim_store, head=40))
        big = {"tool": "search", "result": big_text(FIVE_MB)}
        runs: list[int] = []

        def call_tool() -> dict[str, str]:
            runs.append(1)
            return big

        async def body(run: Execution) -> int:
            value: object = await run.step("tool", call_tool)
            assert value == big
            return len(big["result"])

        workflow = unique("wf")
        assert await advance(workflow, checkpointer, body) == Completed(FIVE_MB)
        assert await advance(workflow, checkpointer, body) == Completed(FIVE_MB)
        assert runs == [1]
        stored = (await inner.load(workflow))["tool"]
        assert isinstance(stored, dict)
        assert str(stored[VALUE_MARK]).startswith("claim:")
        assert stored["head"] == inner.codec.encode(big)[:40]
        assert (await checkpointer.load(workflow))["tool"] == big
        assert (await checkpointer.history(workflow))["tool"].value == big

    async def test_small_values_and_envelope_shaped_dicts_are_recorded_as_they_are(
        self, claim_store: ClaimCheckStore, checkpointer_factory: CheckpointerFactory
    ) -> None:
        inner = await checkpointer_factory()
        checkpointer = ClaimCheckedCheckpointer(inner, ClaimCheckPolicy(claim_store))
        lookalike = {VALUE_MARK: "claim:" + "0" * 64, "head": "", "bytes": 1}
        workflow = unique("wf")
        holder = await checkpointer.claim(workflow, 60, 30)
        assert holder is not None
        assert (await checkpointer.record(holder, "small", [1, 2])).value == [1, 2]
        assert (await checkpointer.record(holder, "lookalike", lookalike)).value == lookalike
        assert await checkpointer.load(workflow) == {"small": [1, 2], "lookalike": lookalike}
        assert (await inner.load(workflow))["small"] == [1, 2]
        assert await claim_store.held() == 0

    async def test_a_large_value_finished_through_the_policy_is_stowed_with_the_status(
        self, claim_store: ClaimCheckStore, checkpointer_factory: CheckpointerFactory
    ) -> None:
        inner = await checkpointer_factory()
        policy = ClaimCheckPolicy(claim_store, threshold=1024)
        checkpointer = ClaimCheckedCheckpointer(inner, policy)
        big = big_text(4096)
        workflow = unique("wf")
        holder = await checkpointer.claim(workflow, 60, 30)
        assert holder is not None
        info = await checkpointer.finish(holder, "result", big, attempts=1)
        assert (info.status, info.attempts) == (WorkflowStatus.COMPLETED, 1)
        assert await inner.get_status(workflow) == info
        assert (await checkpointer.load(workflow))["result"] == big
        stored = (await inner.load(workflow))["result"]
        assert isinstance(stored, dict)
        assert str(stored[VALUE_MARK]).startswith("claim:")

    async def test_an_expired_step_value_raises_claim_unavailable_on_the_next_pass(
        self,
        claim_store: ClaimCheckStore,
        checkpointer_factory: CheckpointerFactory,
        clock: ManualClock,
    ) -> None:
        policy = ClaimCheckPolicy(claim_store, threshold=1024, ttl=60)
        checkpointer = ClaimCheckedCheckpointer(await checkpointer_factory(), policy)
        workflow = unique("wf")
        holder = await checkpointer.claim(workflow, 60, 30)
        assert holder is not None
        await checkpointer.record(holder, "big", big_text(4096))
        clock.advance(61)
        with pytest.raises(ClaimUnavailableError, match="expired"):
            await checkpointer.load(workflow)

    async def test_a_5_mb_payload_field_travels_as_a_handle(
        self,
        claim_store: ClaimCheckStore,
        work_queue_factory: WorkQueueFactory,
        clock: ManualClock,
    ) -> None:
        inner = await work_queue_factory(clock, QueuePolicy())
        queue = ClaimCheckedQueue(inner, ClaimCheckPolicy(claim_store, head=16))
        document = big_text(FIVE_MB)
        item = WorkItem(id=unique("item"), tenant=unique("t"), payload={"doc": document, "n": "1"})
        queued = await queue.enqueue(item)
        assert queued.payload == item.payload
        claimed = await queue.claim(worker="w1")
        assert claimed is not None
        assert claimed.payload == {"doc": document, "n": "1"}
        settled = await queue.complete(claimed.id, tenant=claimed.tenant, worker="w1")
        assert settled.payload["doc"] == document[:16]
        assert PAYLOAD_MANIFEST in settled.payload
        assert (await queue.claims.expand(settled)).payload == item.payload

    async def test_a_payload_holding_the_manifest_field_is_refused_before_io(
        self,
        claim_store: ClaimCheckStore,
        work_queue_factory: WorkQueueFactory,
        clock: ManualClock,
    ) -> None:
        queue = ClaimCheckedQueue(
            await work_queue_factory(clock, QueuePolicy()), ClaimCheckPolicy(claim_store)
        )
        item = WorkItem(id="i", tenant=unique("t"), payload={PAYLOAD_MANIFEST: "{}"})
        with pytest.raises(InvalidInputError):
            await queue.enqueue(item)
        assert await queue.claim(worker="w1") is None


__all__ = ["ClaimCheckStoreConformance", "ClaimCheckStoreFactory"]
