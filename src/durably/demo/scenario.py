"""The demo's story, step by step: start a batch of agent runs, start a worker process,
kill it with SIGKILL while paid calls are in flight, let a second worker process finish
every run, and compute (not assert) what was billed, run and charged.

Every invocation adds a new batch of runs to the same file; earlier batches stay, so the
CLI can inspect them. Pass ``reset=True`` to start from an empty file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durably.app import WorkflowHandle
from durably.app.storage import workflow_at
from durably.demo.app import SCRIPTS, WORKER_ENV, Script, agent_run_id, app
from durably.demo.app import run_id as run_id_of
from durably.demo.ledger import Call, Ledger, ToolRun
from durably.stores.opening import Stores
from durably.stores.status import WorkflowStatus

# Kill the first worker once this many paid calls were billed (of 18).
KILL_AFTER_BILLED = 7
FINISH_TIMEOUT = 45.0
POLL_SECONDS = 0.05
SETTLE_SECONDS = 1.0
"""How long the ledger stays unchanged, everything in it recorded, before the kill."""
FIRST_WORKER = "demo-worker-1"
"""The worker the demo kills, as the provider's bill names it."""
USAGE_RECORD = "durably:usage#"
"""How the record of an addition to a run's usage is keyed (``ctx.add_usage``)."""

RunKey = tuple[str, str]
"""A workflow by tenant and id."""


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One run of the batch: its script, its workflow, and the agent run doing its work
    (the same workflow, or the child a sleeping run starts)."""

    script: Script
    workflow: str
    agent_workflow: str
    handle: WorkflowHandle[Any]

    @property
    def tenant(self) -> str:
        """The run's tenant."""
        return self.script.tenant

    @property
    def agent(self) -> RunKey:
        """The agent run, by tenant and workflow id."""
        return (self.script.tenant, self.agent_workflow)


@dataclass
class RunSummary:
    """One row of the closing table: the bill and the tools' log beside the run record."""

    tenant: str
    run_id: str
    agent: str
    state: str
    status: str
    paid_calls: int
    paid_after_kill: int
    tool_runs: int
    tool_retries: int
    tokens: int
    cost_micros: int
    billed_tokens: int
    billed_cost_micros: int


@dataclass
class TenantTotal:
    """A tenant's runs of the batch: tokens and cost from the run records, and the bill's."""

    tenant: str
    runs: int
    paid_calls: int
    tokens: int
    cost_micros: int
    billed_cost_micros: int


@dataclass
class Report:
    """What the demo did and what it proved, computed from the file."""

    path: str
    batch: int
    earlier_batches: int
    killed_pid: int
    billed_before_kill: int
    in_flight_at_kill: int
    runs: list[RunSummary] = field(default_factory=list)
    tenants: list[TenantTotal] = field(default_factory=list)
    paid_calls_billed: int = 0
    distinct_paid_steps: int = 0
    repeated_paid_steps: list[str] = field(default_factory=list)
    recorded_before_kill_rerun: list[str] = field(default_factory=list)
    records_differing_from_bill: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def no_paid_step_twice(self) -> bool:
        """Whether every paid step was billed at most once (and none recorded before the
        kill ran again)."""
        return not self.repeated_paid_steps and not self.recorded_before_kill_rerun

    @property
    def ok(self) -> bool:
        """Whether every run finished, no paid step ran twice, and every run record
        charged what the provider billed."""
        return (
            self.no_paid_step_twice and not self.unfinished and not self.records_differing_from_bill
        )


Say = Callable[[str], None]


class Demo:
    """Runs the story over the file at ``path``; ``say`` narrates it."""

    def __init__(self, path: str, *, say: Say, reset: bool = False) -> None:
        self.path = os.path.abspath(path)
        relative = os.path.relpath(self.path)
        self.shown = self.path if relative.startswith("..") else os.path.join(".", relative)
        """The file as the narration names it (relative to the current directory)."""
        self._say = say
        self._reset = reset
        self._started = time.monotonic()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._retries_told = 0
        self._sleeps_told: set[str] = set()

    def note(self, message: str) -> None:
        """Narrate one line, stamped with the seconds since the demo began."""
        self._say(f"[{time.monotonic() - self._started:5.1f}s] {message}")

    async def run(self) -> Report:
        """Tell the whole story; the report says what happened."""
        if self._reset:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path + suffix)
        fresh = not await asyncio.to_thread(os.path.exists, self.path)
        app.dsn = f"sqlite:///{self.path}"  # the demo's App, opened on this file
        try:
            return await self._story(await app.stores(), fresh)
        finally:
            for process in self._processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            await app.close()

    async def _story(self, stores: Stores, fresh: bool) -> Report:
        ledger = Ledger(stores.database)
        await ledger.prepare()
        earlier = await ledger.earlier_batches()
        await ledger.set_provider(answering=True)
        batch = await ledger.new_batch(time.time())
        if fresh:
            self.note(f"created {self.shown}")
        else:
            self.note(
                f"reusing {self.shown}: {earlier} earlier batch(es) kept; this is batch {batch}"
            )
        # The worker starts first: it loads pydantic-ai while this process does.
        first = self._spawn(1)
        self.note(f"worker 1 started (pid {first.pid})")
        runs = await self._start_runs(batch)
        tenants = sorted({r.tenant for r in runs})
        agents = sorted({r.script.agent for r in runs})
        self.note(
            f"started {len(runs)} runs of pydantic-ai agents ({', '.join(agents)}) "
            f"for tenants {', '.join(tenants)}"
        )
        await self._wait_for_billed(ledger, batch, runs, first)
        await ledger.set_provider(answering=False)
        await self._wait_until_recorded(stores, ledger, batch)
        calls = await ledger.calls(batch)
        in_flight = [c for c in calls if not c.billed]
        first.send_signal(signal.SIGKILL)
        first.wait()
        billed_before = [c for c in calls if c.billed]
        self.note(
            f"killed worker 1 with SIGKILL: {len(billed_before)} paid calls billed so far, "
            f"{len(in_flight)} in flight (never answered, never billed)"
        )
        for call in in_flight:
            self.note(f"  interrupted mid-call: {call.tenant}/{call.workflow} at {call.step}")
        recorded_at_kill = {run.agent: await _recorded(stores, *run.agent) for run in runs}
        await ledger.set_provider(answering=True)

        second = self._spawn(2)
        self.note(f"worker 2 started (pid {second.pid}); it resumes every unfinished run")
        await self._approve(ledger, batch, runs, second)
        unfinished = await self._wait_finished(ledger, batch, runs, second)
        second.send_signal(signal.SIGTERM)  # it finishes its shutdown while the demo sums up

        report = Report(
            path=self.path,
            batch=batch,
            earlier_batches=earlier,
            killed_pid=first.pid,
            billed_before_kill=len(billed_before),
            in_flight_at_kill=len(in_flight),
            unfinished=unfinished,
        )
        await self._summarise(ledger, runs, recorded_at_kill, report)
        try:
            await asyncio.to_thread(second.wait, 10.0)
        except subprocess.TimeoutExpired:
            second.kill()
        self.note("worker 2 stopped (SIGTERM, graceful)")
        report.seconds = time.monotonic() - self._started
        return report

    async def _start_runs(self, batch: int) -> list[DemoRun]:
        from durably.demo.agent import AGENTS, digest  # loads pydantic-ai: about a second

        runs: list[DemoRun] = []
        for script in SCRIPTS:
            workflow = run_id_of(batch, script.name)
            handle: WorkflowHandle[Any]
            if script.sleep:
                handle = await digest.start(
                    script.task, script.sleep, id=workflow, tenant=script.tenant
                )
                agent_workflow = agent_run_id(workflow)
            else:
                durable = AGENTS[script.agent]
                handle = await durable.start(script.task, id=workflow, tenant=script.tenant)
                agent_workflow = workflow
            runs.append(DemoRun(script, workflow, agent_workflow, handle))
        return runs

    def _spawn(self, number: int) -> subprocess.Popen[bytes]:
        log = open(f"{self.path}.worker-{number}.log", "wb")  # noqa: SIM115 - the child owns it
        command = [
            sys.executable,
            "-m",
            "durably",
            "worker",
            "durably.demo.agent:app",
            "--dsn",
            f"sqlite:///{self.path}",
            "--name",
            f"demo-worker-{number}",
            "--poll-seconds",
            "0.2",
            "--maintenance-seconds",
            "0.5",
            "--grace-seconds",
            "5",
        ]
        env = {**os.environ, WORKER_ENV: f"demo-worker-{number}"}
        # The child must import this very durably, also when it runs from a source tree.
        source = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        self._processes.append(process)
        return process

    def _check_alive(self, process: subprocess.Popen[bytes], number: int) -> None:
        if process.poll() is not None:
            raise DemoError(
                f"worker {number} exited early with code {process.returncode}; "
                f"see {self.path}.worker-{number}.log"
            )

    async def _wait_for_billed(
        self, ledger: Ledger, batch: int, runs: list[DemoRun], process: subprocess.Popen[bytes]
    ) -> None:
        deadline = time.monotonic() + FINISH_TIMEOUT
        while True:
            billed = [c for c in await ledger.calls(batch) if c.billed]
            if len(billed) >= KILL_AFTER_BILLED:
                return
            await self._tell(ledger, batch, runs)
            self._check_alive(process, 1)
            if time.monotonic() > deadline:
                raise DemoError(f"worker 1 billed only {len(billed)} calls in time")
            await asyncio.sleep(POLL_SECONDS)

    async def _wait_until_recorded(self, stores: Stores, ledger: Ledger, batch: int) -> None:
        """With the provider stalled no further call can be billed; wait until every
        billed call, its usage and every tool run are recorded, and nothing more has been
        billed or run for `SETTLE_SECONDS` (a tool whose model answer was recorded just
        before starts within it), so the kill lands only on calls in flight."""
        deadline = time.monotonic() + 10.0
        settled: tuple[int, int] | None = None
        since = 0.0
        while time.monotonic() < deadline:
            billed = [c for c in await ledger.calls(batch) if c.billed]
            ran = [t for t in await ledger.tool_runs(batch) if t.outcome == "ran"]
            if not await _all_recorded(stores, billed, ran):
                settled = None
            elif settled != (len(billed), len(ran)):
                settled, since = (len(billed), len(ran)), time.monotonic()
            elif time.monotonic() - since >= SETTLE_SECONDS:
                return
            await asyncio.sleep(POLL_SECONDS)
        raise DemoError("worker 1 did not record its billed calls in time")

    async def _approve(
        self, ledger: Ledger, batch: int, runs: list[DemoRun], process: subprocess.Popen[bytes]
    ) -> None:
        """Approve each tool call a run waits for, once it waits (holding no process)."""
        from durably.demo.agent import AGENTS, TOOLS
        from durably.pydantic_ai import APPROVALS_EVENT, Approval

        for run in runs:
            if not any(tool.requires_approval for tool in TOOLS[run.script.agent]):
                continue
            durable = AGENTS[run.script.agent]
            deadline = time.monotonic() + FINISH_TIMEOUT
            pending: list[dict[str, Any]] = []
            while not pending and time.monotonic() < deadline:
                self._check_alive(process, 2)
                await self._tell(ledger, batch, runs)
                await asyncio.sleep(POLL_SECONDS)
                pending = await run.handle.get_event(APPROVALS_EVENT) or []
            info = await run.handle.status()
            since = (datetime.now(UTC) - info.updated_at).total_seconds()
            for call in pending:
                answer = Approval(tool_call_id=call["tool_call_id"], approved=True)
                await run.handle.send(durable.approvals, answer)
                self.note(
                    f"approved {call['tool_name']} for {run.tenant}/{run.workflow} "
                    f"after {since:.1f}s {info.status.value}, holding no process"
                )

    async def _tell(self, ledger: Ledger, batch: int, runs: list[DemoRun]) -> None:
        """Narrate each failed tool attempt once (its step's `durably.Retry` tries again),
        and each run seen sleeping."""
        failed = [t for t in await ledger.tool_runs(batch) if t.outcome == "failed"]
        for event in failed[self._retries_told :]:
            self.note(
                f"{event.tenant}/{event.workflow}: {event.tool} failed in {event.worker}; "
                "its step's durably.Retry tries again after a backoff"
            )
        self._retries_told = max(self._retries_told, len(failed))
        for run in runs:
            if not run.script.sleep or run.workflow in self._sleeps_told:
                continue
            if (await run.handle.status()).status is WorkflowStatus.SLEEPING:
                self._sleeps_told.add(run.workflow)
                self.note(
                    f"{run.tenant}/{run.workflow} is sleeping {run.script.sleep:g}s "
                    "(ctx.sleep) before its agent starts; no process holds it"
                )

    async def _wait_finished(
        self, ledger: Ledger, batch: int, runs: list[DemoRun], process: subprocess.Popen[bytes]
    ) -> list[str]:
        deadline = time.monotonic() + FINISH_TIMEOUT
        seen = 0
        pending = list(runs)
        while pending and time.monotonic() < deadline:
            pending = [r for r in pending if not (await r.handle.status()).status.finished]
            await self._tell(ledger, batch, runs)
            done = len(runs) - len(pending)
            if done != seen:
                seen = done
                self.note(f"{done}/{len(runs)} runs finished")
            self._check_alive(process, 2)
            if pending:
                await asyncio.sleep(2 * POLL_SECONDS)
        for run in runs:
            if run not in pending:
                await run.handle.result()  # the answer, decoded (raises if a run failed)
        return [f"{r.tenant}/{r.workflow}" for r in pending]

    async def _summarise(
        self,
        ledger: Ledger,
        runs: list[DemoRun],
        recorded_at_kill: dict[RunKey, set[str]],
        report: Report,
    ) -> None:
        calls = await ledger.calls(report.batch)
        tool_runs = await ledger.tool_runs(report.batch)
        billed = [c for c in calls if c.billed]
        per_step = Counter((c.tenant, c.workflow, c.step) for c in billed)
        report.paid_calls_billed = len(billed)
        report.distinct_paid_steps = len(per_step)
        report.repeated_paid_steps = sorted(
            f"{tenant}/{workflow} {step} x{n}"
            for (tenant, workflow, step), n in per_step.items()
            if n > 1
        )
        report.recorded_before_kill_rerun = sorted(
            f"{c.tenant}/{c.workflow} {c.step}"
            for c in billed
            if c.worker != FIRST_WORKER
            and c.step in recorded_at_kill.get((c.tenant, c.workflow), set())
        )
        for run in runs:
            report.runs.append(await _summary(run, billed, tool_runs))
        report.records_differing_from_bill = [
            f"{r.tenant}/{r.run_id}"
            for r in report.runs
            if (r.tokens, r.cost_micros) != (r.billed_tokens, r.billed_cost_micros)
        ]
        for tenant in sorted({r.tenant for r in report.runs}):
            mine = [r for r in report.runs if r.tenant == tenant]
            report.tenants.append(
                TenantTotal(
                    tenant=tenant,
                    runs=len(mine),
                    paid_calls=sum(r.paid_calls for r in mine),
                    tokens=sum(r.tokens for r in mine),
                    cost_micros=sum(r.cost_micros for r in mine),
                    billed_cost_micros=sum(r.billed_cost_micros for r in mine),
                )
            )


async def _summary(run: DemoRun, billed: list[Call], tool_runs: list[ToolRun]) -> RunSummary:
    """A run's row: its state and status, the agent run's record, the bill, the tools' log."""
    from durably.demo.agent import AGENTS

    info = await run.handle.status()
    state = (await run.handle.run_record()).state
    durable = AGENTS[run.script.agent]
    record = await (
        await durable.workflow.get_handle(run.agent_workflow, tenant=run.tenant)
    ).run_record()
    paid = [c for c in billed if (c.tenant, c.workflow) == run.agent]
    tools = [t for t in tool_runs if (t.tenant, t.workflow) == run.agent]
    return RunSummary(
        tenant=run.tenant,
        run_id=run.workflow,
        agent=run.script.agent,
        state=state.value,
        status=info.status.value,
        paid_calls=len(paid),
        paid_after_kill=sum(1 for c in paid if c.worker != FIRST_WORKER),
        tool_runs=sum(1 for t in tools if t.outcome == "ran"),
        tool_retries=sum(1 for t in tools if t.outcome == "failed"),
        tokens=record.usage.total_tokens,
        cost_micros=record.cost_micros,
        billed_tokens=sum(c.input_tokens + c.output_tokens for c in paid),
        billed_cost_micros=sum(c.cost_micros for c in paid),
    )


async def _recorded(stores: Stores, tenant: str, workflow: str) -> set[str]:
    """The keys of a workflow's records (none for a workflow not started yet)."""
    key = await workflow_at(stores.checkpointer, tenant, workflow)
    return set() if key is None else set(await stores.checkpointer.load(key))


async def _all_recorded(stores: Stores, billed: list[Call], ran: list[ToolRun]) -> bool:
    """Whether every billed call and tool run is a recorded step, and every billed call's
    usage was added to its run (one usage record per billed call)."""
    done: list[Call | ToolRun] = [*billed, *ran]
    records = {run: await _recorded(stores, *run) for run in {(e.tenant, e.workflow) for e in done}}
    if any(e.step not in records[(e.tenant, e.workflow)] for e in done):
        return False
    paid = Counter((c.tenant, c.workflow) for c in billed)
    return all(
        sum(key.startswith(USAGE_RECORD) for key in records[run]) >= count
        for run, count in paid.items()
    )


class DemoError(Exception):
    """The demo could not tell its story (a worker died early, or time ran out)."""


__all__ = [
    "FINISH_TIMEOUT",
    "Demo",
    "DemoError",
    "DemoRun",
    "Report",
    "RunSummary",
    "TenantTotal",
]
