"""What the replay tester reports for each way code can stop fitting a history, and the
histories it refuses or reads: from JSON, from files, from a store by id or in flight."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

import durably
from durably import ManualClock
from durably.app import _replay_pass, replaying
from durably.errors import InvalidInputError, WorkflowNotFoundError
from durably.testing import (
    Finding,
    History,
    assert_replays,
    histories_from_files,
    histories_from_store,
    in_flight_histories,
    replay,
)

Body = Callable[[durably.Context, int], Awaitable[int]]
EFFECTS: list[str] = []


def code(body: Callable[[durably.App], Body], kind: str = "flow") -> durably.App:
    """An App on a memory store whose ``kind`` runs the body ``body`` builds over the
    steps ``add`` and ``double`` (each notes its call in `EFFECTS`)."""
    app = durably.App("memory://", clock=ManualClock())

    @app.step(name="add")
    async def add(n: int) -> int:
        EFFECTS.append(f"add {n}")
        return n + 1

    @app.step(name="double")
    async def double(n: int) -> int:
        EFFECTS.append(f"double {n}")
        return n * 2

    app.workflow(name=kind)(body(app))
    return app


def step(app: durably.App, name: str) -> durably.Step[[int], int]:
    return app._core.steps[name]  # the App's registry: the test's own steps


def add_then_double(app: durably.App) -> Body:
    async def flow(ctx: durably.Context, n: int) -> int:
        return await step(app, "double")(await step(app, "add")(n))

    return flow


def add_then_sleep(app: durably.App) -> Body:
    async def flow(ctx: durably.Context, n: int) -> int:
        value = await step(app, "add")(n)
        await ctx.sleep(3600)
        return value

    return flow


async def stored(app: durably.App, *ids: str, run: bool = True) -> list[History]:
    """Start ``ids`` of kind ``flow`` with argument 1, run them, read their histories."""
    for id in ids:
        await app.workflows["flow"].start(1, id=id)
    if run:
        await app.run_until_idle()
    return await histories_from_store(await app.stores(), ids)


async def history_of(body: Callable[[durably.App], Body], *, run: bool = True) -> History:
    app = code(body)
    async with app:
        (history,) = await stored(app, "w", run=run)
    return history


async def only(app: durably.App, history: History) -> replaying.WorkflowReplay:
    (found,) = (await replay(app, history)).workflows
    return found


async def test_a_finished_history_whose_result_the_code_now_changes_is_result_drift() -> None:
    history = await history_of(add_then_double)

    def add_then_double_plus_one(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            return await step(app, "double")(await step(app, "add")(n)) + 1

        return flow

    assert (await only(code(add_then_double), history)).ok
    found = await only(code(add_then_double_plus_one), history)
    assert found.finding is Finding.RESULT_DRIFT
    assert found.detail == "the body returns 5 where the history completed with 4"


async def test_a_finished_history_the_code_now_goes_on_from_is_step_drift() -> None:
    history = await history_of(add_then_double)

    def one_more(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            value = await step(app, "double")(await step(app, "add")(n))
            return await step(app, "add")(value)

        return flow

    effects = list(EFFECTS)
    found = await only(code(one_more), history)
    assert found.finding is Finding.STEP_DRIFT
    assert "the history completed, but the body now goes on to step 'add#2'" in found.detail
    assert effects == EFFECTS


def fails_after_add(app: durably.App) -> Body:
    async def flow(ctx: durably.Context, n: int) -> int:
        await step(app, "add")(n)
        raise LookupError("no such customer")

    return flow


async def test_a_body_that_fails_as_the_history_did_replays_ok() -> None:
    history = await history_of(fails_after_add)
    found = await only(code(fails_after_add), history)
    assert found.ok, found
    assert found.ending == "failed: LookupError('no such customer')"


async def test_a_body_that_now_fails_where_the_history_went_on_is_reported() -> None:
    history = await history_of(add_then_sleep)
    found = await only(code(fails_after_add), history)
    assert found.finding is Finding.BODY_FAILED
    assert found.detail == "the body raises LookupError('no such customer')"
    assert isinstance(found.error, LookupError)
    # A history that failed otherwise: both named.
    failed = await history_of(fails_after_add)

    def fails_otherwise(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            await step(app, "add")(n)
            raise LookupError("no such account")

        return flow

    found = await only(code(fails_otherwise), failed)
    assert found.finding is Finding.BODY_FAILED
    assert "the history ended \"LookupError('no such customer')\"" in found.detail


class Customer(BaseModel):
    """What ``flow`` takes after a deploy, instead of an int."""

    name: str


async def test_arguments_that_no_longer_fit_the_body_are_an_incompatible_record() -> None:
    history = await history_of(add_then_sleep)
    app = durably.App("memory://")

    @app.workflow(name="flow")
    async def flow(ctx: durably.Context, customer: Customer) -> int:
        return 0

    found = await only(app, history)
    assert found.finding is Finding.INCOMPATIBLE_RECORD
    assert "the record at 'durably:start' is no longer a valid arguments of flow" in found.detail
    assert found.ending.startswith("parked: ")


async def test_a_kind_without_a_body_and_records_without_a_start_have_no_body() -> None:
    history = await history_of(add_then_sleep)
    found = await only(code(add_then_sleep, kind="other"), history)
    assert (found.finding, found.detail) == (
        Finding.NO_BODY,
        "this App registers no body for kind 'flow'",
    )
    bare = History("default", "w", "w", (("step#1", 1),))
    found = await only(code(add_then_sleep), bare)
    assert found.finding is Finding.NO_BODY
    assert found.kind is None


async def test_a_body_that_awaits_something_outside_durably_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_replay_pass, "OUTSIDE_WAIT", 0.2)
    history = await history_of(add_then_sleep)

    def waits_on_a_timer(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            value = await step(app, "add")(n)
            await asyncio.sleep(3600)  # not a durable sleep: a pass must not do this
            return value

        return flow

    found = await only(code(waits_on_a_timer), history)
    assert found.finding is Finding.BODY_FAILED
    assert "awaited something outside durably for 0.2s" in found.detail


async def test_a_body_that_swallows_the_replays_stop_is_reported() -> None:
    history = await history_of(add_then_sleep, run=False)  # started, never run

    def swallows(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            try:
                return await step(app, "add")(n)
            except BaseException:  # catches durably's own stops too
                return -1

        return flow

    found = await only(code(swallows), history)
    assert found.finding is Finding.BODY_FAILED
    assert "caught the replay's stop" in found.detail


async def test_a_body_that_never_settles_is_given_up_on() -> None:
    history = await history_of(add_then_sleep, run=False)

    def clock_watcher(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            while True:
                await ctx.now()

        return flow

    found = await only(code(clock_watcher), history)
    assert found.finding is Finding.BODY_FAILED
    assert f"past {_replay_pass.MAX_KEPT} calls with no record" in found.detail


async def test_a_workflow_never_run_replays_to_its_first_step() -> None:
    history = await history_of(add_then_sleep, run=False)
    effects = list(EFFECTS)
    found = await only(code(add_then_sleep), history)
    assert (found.ok, found.next_calls, found.replayed) == (True, ("add#1",), 0)
    assert effects == EFFECTS


async def test_a_cancelled_workflow_replays_ok_to_its_cancel() -> None:
    app = code(add_then_sleep)
    async with app:
        handle = await app.workflows["flow"].start(1, id="w")
        await app.run_until_idle(advance=False)
        await handle.cancel()
        await app.run_until_idle(advance=False)
        assert (await handle.status()).status.value == "cancelled"
        (history,) = await histories_from_store(await app.stores(), ["w"])
    found = await only(code(add_then_sleep), history)
    assert (found.ok, found.ending) == (True, "cancelled")


async def test_a_workflow_of_another_tenant_is_read_and_replayed_under_its_tenant() -> None:
    app = code(add_then_sleep)
    async with app:
        await app.workflows["flow"].start(1, id="w", tenant="acme")
        await app.workflows["flow"].start(2, id="w")  # the same id in the default tenant
        await app.run_until_idle(advance=False)
        stores = await app.stores()
        (acme,) = await histories_from_store(stores, ["w"], tenant="acme")
        in_flight = await in_flight_histories(stores, tenant="acme")
    assert (acme.tenant, acme.workflow, acme.key) == ("acme", "w", "durably:t4:acme:w")
    assert in_flight == [acme]
    assert History.from_json(acme.to_json()) == acme
    report = await assert_replays(code(add_then_sleep), acme, clock=ManualClock())
    assert report.workflows[0].tenant == "acme"
    assert "of tenant 'acme'" in report.describe()


async def test_in_flight_histories_are_every_unfinished_workflow_of_the_kind() -> None:
    app = code(add_then_sleep)
    other = app.workflow(name="other")(add_then_sleep(app))
    async with app:
        stores = await app.stores()
        for id in ("sleeping-1", "sleeping-2"):
            await app.workflows["flow"].start(1, id=id)
        await other.start(1, id="of-another-kind")
        await app.run_until_idle(advance=False)
        await app.workflows["flow"].start(1, id="later")
        done = await app.workflows["flow"].start(1, id="done")
        await app.run_until_idle(advance=False)
        await (await app.workflows["flow"].get_handle("sleeping-2")).cancel()
        await app.run_until_idle(advance=False)
        assert (await done.status()).status.value == "sleeping"
        await app.workflows["flow"].start(1, id="queued")  # no worker ran it yet: no status
        found = await in_flight_histories(stores, kind="flow")
        assert [h.workflow for h in found] == ["done", "later", "sleeping-1"]
        assert {h.status for h in found} == {"sleeping"}
        with pytest.raises(InvalidInputError, match="more than 2 workflows in flight match"):
            await in_flight_histories(stores, kind="flow", limit=2)
        everything = await in_flight_histories(stores)
        assert "of-another-kind" in [h.workflow for h in everything]


async def test_a_workflow_started_but_never_run_is_found_only_when_asked() -> None:
    app = code(add_then_sleep)
    async with app:
        stores = await app.stores()
        await app.workflows["flow"].start(1, id="queued")
        assert await in_flight_histories(stores) == []
        (queued,) = await in_flight_histories(stores, never_run=True)
    assert (queued.workflow, queued.status, queued.kind) == ("queued", None, "flow")


async def test_reading_an_unknown_workflow_is_not_found(tmp_path: Path) -> None:
    app = code(add_then_sleep)
    async with app:
        with pytest.raises(WorkflowNotFoundError):
            await histories_from_store(await app.stores(), ["nope"])
        with pytest.raises(InvalidInputError):
            await histories_from_store(await app.stores(), [""])
    with pytest.raises(InvalidInputError):
        await in_flight_histories(42)  # type: ignore[arg-type]
    with pytest.raises(durably.ConfigurationError):  # a missing SQLite file is not made
        await in_flight_histories(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "a history is JSON"),
        ("[]", "a history is a JSON object, got list"),
        ('{"history": []}', "history's workflow"),
        ('{"workflow": "w", "history": {}}', "'history' must be a list"),
        ('{"workflow": "w", "history": [{"key": "k"}]}', "each record is an object"),
        ('{"workflow": "w", "history": [{"key": "", "value": 1}]}', "record key"),
    ],
)
def test_a_malformed_history_is_refused_with_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InvalidInputError, match=words):
        History.from_json(text)


async def test_history_files_are_read_from_files_lists_and_folders(tmp_path: Path) -> None:
    first, second = await history_of(add_then_sleep), await history_of(add_then_double)
    (tmp_path / "b.json").write_text(first.to_json(), encoding="utf-8")
    listed = [json.loads(first.to_json()), json.loads(second.to_json())]
    (tmp_path / "a.json").write_text(json.dumps(listed), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a history", encoding="utf-8")
    assert histories_from_files(tmp_path) == [first, second, first]
    assert histories_from_files(tmp_path / "b.json") == [first]
    with pytest.raises(InvalidInputError, match="no history file"):
        histories_from_files(tmp_path / "missing.json")
    (tmp_path / "c.json").write_text("{", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="is not JSON"):
        histories_from_files(tmp_path)


async def test_replay_refuses_what_is_not_an_app_or_a_history() -> None:
    history = await history_of(add_then_sleep)
    with pytest.raises(InvalidInputError, match=r"needs a durably\.App"):
        await replay(object(), history)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="History values"):
        await replay(code(add_then_sleep), [history, {"workflow": "w"}])  # type: ignore[list-item]
    empty = await replay(code(add_then_sleep), [])
    assert (empty.ok, empty.describe()) == (True, "replayed 0 workflow(s): 0 ok")


async def test_a_step_waiting_for_its_next_attempt_replays_to_it_and_its_removal_is_drift() -> None:
    def flaky_then_sleep(app: durably.App) -> Body:
        @app.step(name="flaky", retry=durably.Retry(max_attempts=3, initial=60, jitter=0))
        async def flaky(n: int) -> int:
            EFFECTS.append(f"flaky {n}")
            raise ConnectionError("the provider is down")

        async def flow(ctx: durably.Context, n: int) -> int:
            value = await step(app, "add")(n)
            return await flaky(value)

        return flow

    app = code(flaky_then_sleep)
    async with app:
        await app.workflows["flow"].start(1, id="w")
        await app.run_until_idle(advance=False)  # the first attempt failed: a minute's wait
        (history,) = await histories_from_store(await app.stores(), ["w"])
    assert "flaky#1:retry#1" in dict(history.records)
    effects = list(EFFECTS)
    found = await only(code(flaky_then_sleep), history)
    assert (found.ok, found.next_calls) == (True, ("flaky#1",)), found
    found = await only(code(add_then_sleep), history)  # a deploy that dropped the flaky call
    assert found.finding is Finding.STEP_DRIFT
    assert found.unread == ("flaky#1:retry#1",)
    assert effects == EFFECTS


async def test_a_body_cancelled_by_nobody_is_a_failure_as_in_a_pass() -> None:
    history = await history_of(add_then_sleep, run=False)

    def cancels_itself(app: durably.App) -> Body:
        async def flow(ctx: durably.Context, n: int) -> int:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            return await step(app, "add")(n)

        return flow

    found = await only(code(cancels_itself), history)
    assert found.finding is Finding.BODY_FAILED
    assert "StrayCancellationError('the body ended with asyncio.CancelledError" in found.detail
