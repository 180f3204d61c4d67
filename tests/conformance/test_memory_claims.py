"""The claim-check conformance suite against the in-memory and the filesystem stores
(their policy cases over memory checkpointers and queues)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from durably.claimcheck import FileClaimCheckStore
from durably.claimcheck.store import ClaimCheckStore
from durably.clock import Clock
from durably.memory import MemoryCheckpointer, MemoryClaimCheckStore, MemoryWorkQueue
from durably.stores.work import QueuePolicy, WorkQueue
from durably.stores.workflows import Checkpointer
from durably.testing import ClaimCheckStoreConformance
from durably.testing.checkpointer import CheckpointerFactory
from durably.testing.claimcheck import ClaimCheckStoreFactory
from durably.testing.queue import WorkQueueFactory


@pytest.fixture
def checkpointer_factory() -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return MemoryCheckpointer()

    return make


@pytest.fixture
def work_queue_factory() -> WorkQueueFactory:
    async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
        return MemoryWorkQueue(clock, policy)

    return make


class TestMemoryClaimCheckStore(ClaimCheckStoreConformance):
    @pytest.fixture
    def claim_store_factory(self) -> ClaimCheckStoreFactory:
        async def make(clock: Clock) -> ClaimCheckStore:
            return MemoryClaimCheckStore(clock=clock)

        return make


class TestFileClaimCheckStore(ClaimCheckStoreConformance):
    @pytest.fixture
    def claim_store_factory(self, tmp_path: Path) -> ClaimCheckStoreFactory:
        async def make(clock: Clock) -> ClaimCheckStore:
            return FileClaimCheckStore(tmp_path / "claims", clock=clock)

        return make


async def test_blob_files_are_the_owners_alone(tmp_path: Path) -> None:
    store = FileClaimCheckStore(tmp_path / "claims")
    handle = await store.put(b"secret tool output")
    directory = tmp_path / "claims"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = list(directory.iterdir())
    assert [path.name for path in files] == [handle.removeprefix("claim:")]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600


async def test_a_blob_file_is_replaced_whole_and_leaves_no_temporary_behind(
    tmp_path: Path,
) -> None:
    store = FileClaimCheckStore(tmp_path / "claims")
    handle = await store.put(b"x" * 1000, ttl=5)
    assert await store.put(b"x" * 1000, ttl=50) == handle  # rewritten with the longer life
    assert [p.name for p in (tmp_path / "claims").iterdir()] == [handle.removeprefix("claim:")]
    assert await store.fetch(handle) == b"x" * 1000
