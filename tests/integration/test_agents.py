"""Durable pydantic-ai agents over every backing, driven by a `FunctionModel` that bills.

The model function and the tools write a ledger (one line per paid call, one per tool
run), read from outside: what was paid is counted by the provider's side, never by the
code under test. Run as a module, it is a worker process:
``python -m tests.integration.test_agents DSN LEDGER``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from durably import App, Context, Retry, Topic, WorkflowStatus, context
from durably.clock import ManualClock
from durably.errors import InvalidInputError
from durably.pydantic_ai import Approval, DurableAgent, Price
from durably.stores.runs import RunState
from tests.pg_service import create_database
from tests.redis_service import durable_server

ROOT = Path(__file__).resolve().parents[2]
LEASE = 1.0
ARMED = "armed"  # while this file exists beside the ledger, the third model call kills
REDIS_DB = 9
PRICES = {"billing": Price(input=2, output=10)}
"""Two dollars per million prompt tokens, ten per million completion tokens: a token of
each costs 2 and 10 micro-dollars."""


class Ticket(BaseModel):
    """The agent's typed output."""

    summary: str
    refunded: int


def _turn(messages: list[ModelMessage]) -> int:
    """Which model call this is: one more than the responses the history holds."""
    return 1 + sum(isinstance(m, ModelResponse) for m in messages)


def _usage(turn: int) -> RequestUsage:
    return RequestUsage(input_tokens=100 * turn, output_tokens=10 * turn)


def _bill(ledger: Path, line: str) -> None:
    with ledger.open("a") as sink:
        sink.write(f"{line}\n")


def build(dsn: str, ledger: Path, *, name: str = "support", clock: Any = None) -> tuple[App, Any]:
    """An App with a three-turn support agent: two tools, then a typed answer.

    Each process of a test builds the same one. The third model call kills its process
    while the ``armed`` file exists (once: it removes the file first).
    """
    app = App(dsn, lease=LEASE, clock=clock)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _turn(messages)
        armed = ledger.parent / ARMED
        if turn == 3 and armed.exists():
            armed.unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        run = _run_of(messages)
        _bill(ledger, f"model {run} {turn} {100 * turn} {10 * turn}")
        if turn == 1:
            parts: list[Any] = [ToolCallPart("lookup_order", {"order": run})]
        elif turn == 2:
            parts = [ToolCallPart("refund", {"order": run, "amount": 7})]
        else:
            parts = [ToolCallPart("final_result", {"summary": f"done {run}", "refunded": 7})]
        return ModelResponse(parts=parts, usage=_usage(turn), model_name="billing")

    agent = Agent(FunctionModel(model, model_name="billing"), output_type=Ticket, name=name)

    @agent.tool_plain
    def lookup_order(order: str) -> dict[str, str]:
        _bill(ledger, f"tool lookup {order}")
        return {"order": order, "state": "shipped"}

    @agent.tool_plain
    async def refund(order: str, amount: int) -> str:
        _bill(ledger, f"tool refund {order}")
        return f"refunded {amount} on {order}"

    durable = DurableAgent(agent, app, prices=PRICES)
    return app, durable


def _run_of(messages: list[ModelMessage]) -> str:
    """The run's id, which every prompt of these tests is."""
    first = messages[0]
    return str(first.parts[-1].content)  # type: ignore[union-attr]


def lines(ledger: Path, prefix: str) -> list[str]:
    if not ledger.exists():
        return []
    return [line for line in ledger.read_text().splitlines() if line.startswith(prefix)]


def billed(ledger: Path, run: str) -> tuple[int, int, int]:
    """Calls, input tokens and output tokens the provider billed for ``run``."""
    paid = [line.split() for line in lines(ledger, f"model {run} ")]
    return len(paid), sum(int(p[3]) for p in paid), sum(int(p[4]) for p in paid)


def spawn(dsn: str, ledger: Path) -> subprocess.Popen[bytes]:
    log = ledger.with_suffix(f".{len(list(ledger.parent.glob('*.log')))}.log")
    # Run as a module from the checkout's root: run as a file, its directory would come
    # first on the path, and its ``redis`` test package would hide the driver.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.test_agents", dsn, str(ledger)],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": path},
        )
    _LOGS[process.pid] = log
    return process


# Each spawned worker's log, by process id.
_LOGS: dict[int, Path] = {}


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> int:
    """Stop a worker once it serves: a signal sent while it still imports (another worker
    may have done every run meanwhile) would find no handler installed yet."""
    log = _LOGS.get(process.pid)
    deadline = time.monotonic() + 60
    while log is not None and process.poll() is None and time.monotonic() < deadline:
        if " started: " in log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.send_signal(signum)
    return process.wait(timeout=60)


async def wait_for(condition: Callable[[], object], what: str, timeout: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if condition():
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# --- backings ---------------------------------------------------------------------------

_PG: list[str] = []


def _postgres() -> str:
    if not _PG:
        _PG.append(create_database())
    return _PG[0]


async def _redis() -> str:
    redis = pytest.importorskip("redis.asyncio")
    url = f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"
    client = redis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()
    return url


async def _dsn(backing: str, tmp_path: Path) -> str:
    if backing == "memory":
        return "memory://"
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'agents.db'}"
    if backing == "postgres":
        return _postgres()
    return await _redis()


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def shared_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store several processes share."""
    return await _dsn(request.param, tmp_path)


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await _dsn(request.param, tmp_path)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.txt"


# --- crash and resume -------------------------------------------------------------------


async def test_a_run_killed_after_its_second_model_call_makes_only_the_third(
    shared_dsn: str, ledger: Path
) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    (ledger.parent / ARMED).touch()
    app, durable = build(shared_dsn, ledger)
    async with app:
        handle = await durable.start(run, id=run)
        first = spawn(shared_dsn, ledger)
        assert first.wait(timeout=90) == -signal.SIGKILL  # killed in its third model call
        assert billed(ledger, run)[0] == 2
        second = spawn(shared_dsn, ledger)
        try:
            result = await handle.result(timeout=90)
        finally:
            stop(second)
        assert result == Ticket(summary=f"done {run}", refunded=7)
        calls, input_tokens, output_tokens = billed(ledger, run)
        turns = [line.split()[2] for line in lines(ledger, f"model {run} ")]
        assert turns == ["1", "2", "3"]  # the resumed run made exactly the remaining call
        assert len(lines(ledger, "tool lookup")) == 1
        assert len(lines(ledger, "tool refund")) == 1
        record = await handle.run_record()
        assert record.state is RunState.COMPLETED
        assert (record.usage.input_tokens, record.usage.output_tokens) == (
            input_tokens,
            output_tokens,
        )
        assert record.usage.requests == calls == 3
        assert record.cost_micros == input_tokens * 2 + output_tokens * 10


async def test_twenty_agents_across_two_worker_processes_each_bill_their_own_usage(
    shared_dsn: str, ledger: Path
) -> None:
    app, durable = build(shared_dsn, ledger)
    async with app:
        runs = [f"many-{n}-{uuid.uuid4().hex[:6]}" for n in range(20)]
        handles = [
            await durable.start(run, id=run, tenant=f"t{n % 2}") for n, run in enumerate(runs)
        ]
        workers = [spawn(shared_dsn, ledger) for _ in range(2)]
        try:
            results = await asyncio.gather(*(h.result(timeout=110) for h in handles))
        finally:
            for worker in workers:
                assert stop(worker) == 0
        assert [r.summary for r in results] == [f"done {run}" for run in runs]
        for run, handle in zip(runs, handles, strict=True):
            calls, input_tokens, output_tokens = billed(ledger, run)
            record = await handle.run_record()
            assert calls == 3
            assert record.tenant in ("t0", "t1")
            assert (record.usage.input_tokens, record.usage.output_tokens) == (
                input_tokens,
                output_tokens,
            )
            assert record.cost_micros == input_tokens * 2 + output_tokens * 10


# --- approvals and run states -----------------------------------------------------------


def _approval_agent(app: App, ledger: Path, name: str, *, flaky: int = 0) -> Any:
    """A one-tool agent whose tool needs approval; it notes the run state it runs in."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _turn(messages)
        _bill(ledger, f"model {name} {turn} 5 1")
        if turn == 1:
            parts: list[Any] = [ToolCallPart("wire", {"amount": 40})]
        else:
            parts = [TextPart(f"after {len(messages)} messages")]
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=5, output_tokens=1))

    agent = Agent(FunctionModel(model), name=name)
    seen: list[RunState] = []

    @agent.tool_plain(requires_approval=True)
    async def wire(amount: int) -> str:
        handle = await app.get_handle(context().workflow)
        seen.append((await handle.run_record()).state)
        _bill(ledger, f"tool wire {amount}")
        if flaky:
            raise ConnectionError("the bank is down")
        return f"wired {amount}"

    durable = DurableAgent(agent, app, tool_retry=Retry(max_attempts=2, initial=0.01))
    durable.seen = seen  # type: ignore[attr-defined]
    return durable


async def test_an_approval_round_trip_through_handle_send_and_the_run_states(
    dsn: str, ledger: Path
) -> None:
    name = f"payer-{uuid.uuid4().hex[:8]}"
    async with App(dsn, clock=ManualClock(0)) as app:
        durable = _approval_agent(app, ledger, name)
        handle = await durable.start("pay the invoice", id="pay-1")
        assert (await handle.run_record()).state is RunState.PENDING
        await app.run_until_idle()
        record = await handle.run_record()
        assert record.state is RunState.SUSPENDED  # waiting for the approval, no process
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        pending = await handle.get_event("approvals")
        assert [p["tool_name"] for p in pending] == ["wire"]
        assert lines(ledger, "tool wire") == []
        with pytest.raises(InvalidInputError):
            await handle.send(durable.approvals, {"approved": "yes"})  # not an Approval
        await handle.send(durable.approvals, Approval(tool_call_id="another", approved=False))
        await handle.send(
            durable.approvals, Approval(tool_call_id=pending[0]["tool_call_id"], approved=True)
        )
        await app.run_until_idle()
        assert await handle.result() == "after 3 messages"
        assert lines(ledger, "tool wire") == ["tool wire 40"]
        assert durable.seen == [RunState.RUNNING]
        record = await handle.run_record()
        assert record.state is RunState.COMPLETED
        assert (record.usage.input_tokens, record.usage.requests) == (10, 2)
        assert len(lines(ledger, f"model {name} ")) == 2  # no replay paid again


async def test_a_denied_call_tells_the_model_and_runs_nothing(dsn: str, ledger: Path) -> None:
    name = f"payer-{uuid.uuid4().hex[:8]}"
    async with App(dsn, clock=ManualClock(0)) as app:
        durable = _approval_agent(app, ledger, name)
        handle = await durable.start("pay", id="deny-1")
        await app.run_until_idle()
        pending = await handle.get_event("approvals")
        await handle.send(
            durable.approvals,
            Approval(tool_call_id=pending[0]["tool_call_id"], approved=False, message="no"),
        )
        await app.run_until_idle()
        assert await handle.result() == "after 3 messages"
        assert lines(ledger, "tool wire") == []


async def test_a_tool_that_exhausts_its_retries_fails_the_run(dsn: str, ledger: Path) -> None:
    name = f"payer-{uuid.uuid4().hex[:8]}"
    async with App(dsn, clock=ManualClock(0)) as app:
        durable = _approval_agent(app, ledger, name, flaky=1)
        handle = await durable.start("pay", id="flaky-1")
        await app.run_until_idle()
        pending = await handle.get_event("approvals")
        await handle.send(
            durable.approvals, Approval(tool_call_id=pending[0]["tool_call_id"], approved=True)
        )
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.FAILED
        assert len(lines(ledger, "tool wire")) == 2  # two attempts, then the run failed
        assert (await handle.run_record()).state is RunState.FAILED


async def test_a_cancelled_run_is_cancelled_in_its_record(dsn: str, ledger: Path) -> None:
    name = f"payer-{uuid.uuid4().hex[:8]}"
    async with App(dsn, clock=ManualClock(0)) as app:
        durable = _approval_agent(app, ledger, name)
        handle = await durable.start("pay", id="cancel-1")
        await app.run_until_idle()
        assert await handle.cancel()
        await app.run_until_idle()
        assert (await handle.run_record()).state is RunState.CANCELLED
        assert lines(ledger, "tool wire") == []


# --- bad input --------------------------------------------------------------------------


def test_a_negative_price_is_refused_before_any_run() -> None:
    app = App("memory://")
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")])), name="p")
    with pytest.raises(InvalidInputError, match=r"prices\['m'\]\.output"):
        DurableAgent(agent, app, prices={"m": Price(output=-1)})
    assert "p" not in app.workflows


async def test_arguments_that_do_not_validate_go_back_to_the_model_once(
    dsn: str, ledger: Path
) -> None:
    name = f"typo-{uuid.uuid4().hex[:8]}"

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _turn(messages)
        _bill(ledger, f"model {name} {turn}")
        if turn == 1:
            parts: list[Any] = [ToolCallPart("double", {"n": "not a number"})]
        elif turn == 2:
            parts = [ToolCallPart("double", {"n": 4})]
        else:
            parts = [TextPart("8")]
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=3, output_tokens=1))

    agent = Agent(FunctionModel(model), name=name)

    @agent.tool_plain
    def double(n: int) -> int:
        _bill(ledger, f"tool double {n}")
        return 2 * n

    async with App(dsn, clock=ManualClock(0)) as app:
        durable = DurableAgent(agent, app)
        handle = await durable.start("double 4")
        await app.run_until_idle()
        assert await handle.result() == "8"
        assert lines(ledger, "tool double") == ["tool double 4"]
        assert len(lines(ledger, f"model {name} ")) == 3
        assert (await handle.run_record()).usage.requests == 3


async def test_usage_with_a_negative_count_is_refused_and_stores_nothing(dsn: str) -> None:
    async with App(dsn, clock=ManualClock(0)) as app:
        kind = f"usage-{uuid.uuid4().hex[:8]}"

        @app.workflow(name=kind)
        async def spend(ctx: Context, tokens: int) -> None:
            await ctx.add_usage(input_tokens=5)
            await ctx.add_usage(output_tokens=tokens)

        handle = await spend.start(-1)
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.FAILED
        assert "output_tokens must not be negative" in str((await handle.status()).last_error)
        record = await handle.run_record()
        assert (record.usage.input_tokens, record.usage.output_tokens) == (5, 0)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    built, _ = build(sys.argv[1], Path(sys.argv[2]))
    asyncio.run(built.serve(grace=0.2))


def test_durably_runs_shows_app_runs_with_their_workflows_state_and_tenant_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from durably.cli import main

    path = f"sqlite:///{tmp_path / 'runs.db'}"
    wait = Topic("go", int)

    async def seed() -> None:
        async with App(path, clock=ManualClock(0)) as app:

            @app.workflow(name="spender")
            async def spender(ctx: Context, tokens: int) -> int:
                await ctx.add_usage(input_tokens=tokens, output_tokens=1, cost_micros=tokens)
                if tokens > 10:
                    await ctx.recv(wait)
                return tokens

            for tenant, run, tokens in (("a", "r1", 5), ("a", "r2", 50), ("b", "r1", 7)):
                await spender.start(tokens, id=run, tenant=tenant)
            await app.run_until_idle()

    asyncio.run(seed())

    def cli(*argv: str) -> str:
        code = main(list(argv))
        out, _ = capsys.readouterr()
        assert code == 0
        return out

    listed = json.loads(cli("runs", "list", "--dsn", path, "--json"))["runs"]
    states = {(r["tenant"], r["run_id"]): r["state"] for r in listed}
    assert states == {("a", "r1"): "completed", ("a", "r2"): "suspended", ("b", "r1"): "completed"}
    suspended = json.loads(cli("runs", "list", "--dsn", path, "--state", "suspended", "--json"))
    assert [r["run_id"] for r in suspended["runs"]] == ["r2"]
    table = cli("runs", "list", "--dsn", path)
    totals = [line.split() for line in table.splitlines() if line.startswith(("a ", "b "))]
    assert ["a", "2", "55", "2", "57", "$0.0001"] in totals
    shown = json.loads(cli("runs", "show", "--dsn", path, "--tenant", "a", "r2", "--json"))
    assert (shown["state"], shown["agent_name"]) == ("suspended", "spender")


async def test_a_workflow_started_anew_after_its_sweep_starts_a_fresh_run_record(
    tmp_path: Path,
) -> None:
    async with App(f"sqlite:///{tmp_path / 'swept.db'}", retention=0.05) as app:

        @app.workflow(name="once")
        async def once(ctx: Context, tokens: int) -> int:
            await ctx.add_usage(input_tokens=tokens)
            return tokens

        first = await once.start(5, id="same")
        await app.run_until_idle()
        assert (await first.run_record()).usage.input_tokens == 5
        await asyncio.sleep(0.5)  # past its retention, by the store's own clock
        assert await app.sweep() == 1
        again = await once.start(7, id="same")
        await app.run_until_idle()
        assert await again.result() == 7
        assert (await again.run_record()).usage.input_tokens == 7


async def test_usage_of_concurrent_branches_all_lands_and_a_replay_adds_none(dsn: str) -> None:
    wait = Topic("more", int)
    async with App(dsn, clock=ManualClock(0)) as app:
        kind = f"fan-{uuid.uuid4().hex[:8]}"

        @app.workflow(name=kind)
        async def fan(ctx: Context, width: int) -> int:
            await ctx.gather(*(ctx.add_usage(input_tokens=n, cost_micros=1) for n in range(width)))
            await ctx.recv(wait)  # the next pass replays every addition above
            await ctx.add_usage(output_tokens=3)
            return width

        handle = await fan.start(20)
        await app.run_until_idle()
        assert (await handle.run_record()).usage.input_tokens == sum(range(20))
        await handle.send(wait, 1)
        await app.run_until_idle()
        record = await handle.run_record()
        assert (record.usage.input_tokens, record.usage.output_tokens) == (sum(range(20)), 3)
        assert record.cost_micros == 20


async def test_an_event_stream_handler_sees_the_runs_events(dsn: str, ledger: Path) -> None:
    from pydantic_ai.messages import FunctionToolCallEvent, PartStartEvent

    seen: list[str] = []

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            if isinstance(event, PartStartEvent | FunctionToolCallEvent):
                seen.append(type(event).__name__)

    app, _ = build(dsn, ledger, clock=ManualClock(0))
    async with app:
        agent = Agent(
            FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])), name="streamer"
        )
        durable = DurableAgent(agent, app, event_stream_handler=handler)
        handle = await durable.start("hello")
        await app.run_until_idle()
        assert await handle.result() == "hi"
        assert seen == ["PartStartEvent"]


async def test_an_agent_with_an_output_validator_runs_as_it_is(ledger: Path) -> None:
    agent = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("checked")])), name="strict"
    )

    @agent.output_validator
    def keep(output: str) -> str:
        return output.upper()

    async with App("memory://", clock=ManualClock(0)) as app:
        durable = DurableAgent(agent, app)
        handle = await durable.start("go")
        await app.run_until_idle()
        assert await handle.result() == "CHECKED"
