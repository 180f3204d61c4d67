"""Names that would make a record key too long, or fall in a reserved key space, are refused
when they are given (registration, `Topic`, `.keyed`, `set_event`), naming what was
refused, rather than failing the workflow at some later call; values a validator refuses
on decode park the workflow, whatever the validator raised, and reach a handle as
`IncompatibleRecordError`; durations past any float are refused with a typed error."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, model_validator

import durably
from durably.app import _layout as layout
from durably.errors import (
    ConfigurationError,
    IncompatibleRecordError,
    InvalidInputError,
    StatePersistenceError,
    StoreUnavailableError,
)
from durably.memory import MemoryCheckpointer
from durably.redaction import mend_text
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import value_refused
from durably.validation import MAX_ID_BYTES


def _app() -> durably.App:
    return durably.App("memory://", clock=durably.ManualClock())


def test_a_step_name_over_the_bound_is_refused_at_registration() -> None:
    app = _app()
    with pytest.raises(InvalidInputError, match="step name"):
        app.step(name="s" * (layout.NAME_BYTES + 1))(_noop)
    assert app.step(name="s" * layout.NAME_BYTES)(_noop).name == "s" * layout.NAME_BYTES


def test_a_multibyte_name_is_counted_in_utf8_bytes() -> None:
    with pytest.raises(InvalidInputError, match="topic name"):
        durably.Topic("é" * (layout.NAME_BYTES // 2 + 1), int)
    assert durably.Topic("é" * (layout.NAME_BYTES // 2), int).name


def test_a_workflow_kind_over_the_bound_is_refused_at_registration() -> None:
    app = _app()

    async def body(ctx: durably.Context) -> None:
        return None

    with pytest.raises(InvalidInputError, match="workflow kind"):
        app.workflow(name="k" * (layout.NAME_BYTES + 1))(body)


def test_a_keyed_step_whose_key_would_be_too_long_is_refused_at_keyed() -> None:
    step = _app().step(name="s" * layout.NAME_BYTES)(_noop)
    with pytest.raises(InvalidInputError, match="key"):
        step.keyed("k" * (layout.KEYED_BYTES - layout.NAME_BYTES))
    assert step.keyed("k" * (layout.KEYED_BYTES - layout.NAME_BYTES - 2))


@pytest.mark.parametrize("name", ["inbox:abc", "durably:abc"])
def test_a_step_named_in_a_reserved_key_space_is_refused_at_registration(name: str) -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        _app().step(name=name)(_noop)


def test_the_longest_names_still_make_keys_every_backing_takes() -> None:
    longest = "n" * layout.NAME_BYTES
    derived = [
        layout.occurrence(f"{layout.CHILD}{longest}", 10**12),
        layout.end_key(layout.occurrence(f"{layout.CHILD}{longest}", 10**12)),
        f"{layout.occurrence(f'{layout.PREFIX}recv:{longest}', 10**12)}:deadline",
        layout.event_key(longest, 10**12),
        layout.retry_key(layout.occurrence(longest, 10**12), 10**6),
        layout.retry_key("k" * layout.KEYED_BYTES, 10**6),
    ]
    assert max(len(key.encode()) for key in derived) <= MAX_ID_BYTES


async def test_an_event_key_over_the_bound_fails_at_set_event_naming_it() -> None:
    app = _app()

    @app.workflow
    async def publishing(ctx: durably.Context) -> str:
        try:
            await ctx.set_event("e" * (layout.NAME_BYTES + 1), 1)
        except InvalidInputError as exc:
            return str(exc)
        return "published"

    handle = await publishing.start()
    await app.run_until_idle()
    assert "event key" in await handle.result(timeout=5)
    await app.close()


async def test_a_child_whose_derived_id_would_be_too_long_asks_for_an_id() -> None:
    app = _app()

    @app.workflow
    async def child(ctx: durably.Context) -> int:
        return 1

    @app.workflow
    async def parent(ctx: durably.Context) -> str:
        try:
            await ctx.child(child)
        except InvalidInputError as exc:
            return str(exc)
        return "started"

    handle = await parent.start(id="p" * (MAX_ID_BYTES - 8))
    await app.run_until_idle()
    assert "give it an id=" in await handle.result(timeout=5)
    await app.close()


class Fussy(BaseModel):
    value: int

    @model_validator(mode="before")
    @classmethod
    def refuse_thirteen(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("value") == 13:
            raise TypeError("13 is refused")  # not a ValueError: pydantic lets it through
        return data


async def test_a_validator_raising_type_error_on_decode_parks_the_workflow() -> None:
    app = _app()

    @app.step
    async def pick() -> Fussy:
        return Fussy.model_construct(value=13)

    @app.workflow
    async def picking(ctx: durably.Context) -> int:
        return (await pick()).value

    handle = await picking.start()
    await app.run_until_idle()
    info = await handle.status()
    assert info.status is WorkflowStatus.PARKED
    assert "IncompatibleRecordError" in (info.last_error or "")
    assert "13 is refused" in (info.last_error or "")
    assert info.attempts == 0
    await app.close()


async def test_the_memory_store_refuses_values_over_its_limit_as_sqlite_does() -> None:
    checkpointer = MemoryCheckpointer(max_value_bytes=1000)
    await checkpointer.supply("w", "small", "x" * 900)
    with pytest.raises(StatePersistenceError, match="too_large") as refused:
        await checkpointer.supply("w", "big", "x" * 1000)
    assert not refused.value.retryable
    assert set(await checkpointer.load("w")) == {"small"}


def test_failure_text_is_kept_with_its_secrets_masked() -> None:
    text = mend_text("RuntimeError('auth failed: password=hunter2 Bearer abcdefghijkl')", "e")
    assert "hunter2" not in text
    assert "abcdefghijkl" not in text
    assert text.startswith("RuntimeError('auth failed: password=[secret]")


async def _noop() -> None:
    return None


def test_a_step_name_with_a_hash_is_refused_as_it_could_name_another_step_s_record() -> None:
    with pytest.raises(ConfigurationError, match="'#' is reserved"):
        _app().step(name="charge#1:retry")(_noop)


@pytest.mark.parametrize("duration", [10**400, -(10**400)])
async def test_a_duration_past_any_float_is_refused_with_a_typed_error(duration: int) -> None:
    app = _app()

    @app.workflow
    async def timed(ctx: durably.Context) -> None:
        return None

    with pytest.raises(InvalidInputError, match="timeout"):
        await timed.start(timeout=duration)
    await app.close()


class Counted(BaseModel):
    count: int


async def test_a_result_that_no_longer_decodes_is_an_incompatible_record_error(
    tmp_path: Path,
) -> None:
    dsn = f"sqlite:///{tmp_path / 'changed.db'}"
    before = durably.App(dsn, clock=durably.ManualClock())

    @before.workflow(name="counting")
    async def counting(ctx: durably.Context) -> Counted:
        await ctx.set_event("progress", {"count": "many"})
        return Counted(count=3)

    handle = await counting.start()
    await before.run_until_idle()
    assert await handle.result(timeout=5) == Counted(count=3)
    await before.close()
    # A deploy changes the result's type under the finished workflow.
    after = durably.App(dsn, clock=durably.ManualClock())

    @after.workflow(name="counting")
    async def recounting(ctx: durably.Context) -> list[int]:
        return []

    changed = await recounting.get_handle(handle.id)
    with pytest.raises(IncompatibleRecordError, match="durably:result"):
        await changed.result(timeout=5)
    with pytest.raises(IncompatibleRecordError, match="progress"):
        await changed.get_event("progress", type=Counted)
    await after.close()


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (StatePersistenceError("memory", "too_large", "big"), True),
        (InvalidInputError("value must not contain a NUL character"), True),
        (ValueError("Out of range float values are not JSON compliant"), True),
        (TypeError("not JSON serializable"), True),
        (StatePersistenceError("sqlite", "contended"), False),
        (StoreUnavailableError("cannot reach"), False),
        (ConfigurationError("schema version 2, expected 3"), False),
        (ConnectionError("reset"), False),
    ],
)
def test_only_a_value_the_store_refuses_fails_a_workflow_at_its_last_write(
    error: BaseException, refused: bool
) -> None:
    assert value_refused(error) is refused
