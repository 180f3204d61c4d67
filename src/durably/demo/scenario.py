"""The demo's story, step by step: create a batch of runs, start a worker process, kill it
with SIGKILL while paid calls are in flight, let a second worker process finish every run,
and compute (not assert) what was billed, run and replayed.

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

from durably.app import WorkflowHandle
from durably.app.storage import workflow_at
from durably.demo.agent import APPROVAL, WORKER_ENV, Action, Answer, Brief, agent, app
from durably.demo.ledger import Ledger
from durably.stores.opening import Stores
from durably.stores.runs import RunRecord, StateKey
from durably.stores.status import WorkflowStatus

# Kill the first worker once this many paid calls were billed (of about 19).
KILL_AFTER_BILLED = 7
FINISH_TIMEOUT = 45.0

# (tenant, run name, agent, task, plan). Each plan action follows a model call.
RUNS: tuple[tuple[str, str, str, str, tuple[dict[str, object], ...]], ...] = (
    (
        "acme",
        "research",
        "research-agent",
        "Compare three vector databases for our search team",
        (
            {"kind": "tool", "tool": "search", "arg": "vector database benchmarks"},
            {"kind": "tool", "tool": "calculator", "arg": "cost per million vectors"},
        ),
    ),
    (
        "acme",
        "incident-digest",
        "research-agent",
        "Summarise last week's incident reports",
        (
            {"kind": "tool", "tool": "search", "arg": "incident reports week 41"},
            {"kind": "sleep", "seconds": 2.0},
            {"kind": "tool", "tool": "search", "arg": "incident follow-ups"},
        ),
    ),
    (
        "globex",
        "renewal-offer",
        "sales-agent",
        "Email the renewal offer to Initrode",
        (
            {"kind": "tool", "tool": "draft_email", "arg": "renewal offer"},
            {"kind": "approval", "tool": "send_email", "arg": "renewal offer"},
        ),
    ),
    (
        "globex",
        "field-briefing",
        "ops-agent",
        "Write the weather briefing for the field team",
        (
            {"kind": "tool", "tool": "weather", "arg": "Springfield"},
            {"kind": "tool", "tool": "calculator", "arg": "crew hours"},
        ),
    ),
    (
        "initech",
        "refund",
        "support-agent",
        "Refund order 4411 if it arrived damaged",
        (
            {"kind": "tool", "tool": "lookup_order", "arg": "4411"},
            {"kind": "tool", "tool": "refund", "arg": "4411"},
        ),
    ),
    (
        "initech",
        "sso-ticket",
        "support-agent",
        "Answer the ticket about setting up SSO",
        (
            {"kind": "tool", "tool": "search", "arg": "SSO SAML setup"},
            {"kind": "tool", "tool": "search", "arg": "SSO troubleshooting"},
        ),
    ),
)
APPROVAL_RUN = "renewal-offer"


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One run of the batch: its record key and the workflow driving it."""

    tenant: str
    run_id: str
    agent: str
    workflow: str
    task: str
    plan: tuple[dict[str, object], ...]
    handle: WorkflowHandle[Answer]
    key: str
    """Where the store keeps the workflow's records (its id is unique within its tenant)."""


@dataclass
class RunSummary:
    """One row of the closing table."""

    tenant: str
    run_id: str
    state: str
    status: str
    steps_run: int
    steps_replayed: int
    paid_calls: int
    tokens: int
    cost_micros: int
    tool_retries: int
    tool_calls: int = 0


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
    paid_calls_billed: int = 0
    distinct_paid_steps: int = 0
    repeated_paid_steps: list[str] = field(default_factory=list)
    recorded_before_kill_rerun: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def no_paid_step_twice(self) -> bool:
        """Whether every paid step was billed at most once (and none recorded before the
        kill ran again)."""
        return not self.repeated_paid_steps and not self.recorded_before_kill_rerun

    @property
    def ok(self) -> bool:
        """Whether every run finished and no paid step ran twice."""
        return self.no_paid_step_twice and not self.unfinished


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
        runs = await self._create_runs(stores, batch)
        tenants = sorted({r.tenant for r in runs})
        self.note(f"queued {len(runs)} agent runs for tenants {', '.join(tenants)}")

        first = self._spawn(1)
        self.note(f"worker 1 started (pid {first.pid})")
        await self._wait_for_billed(ledger, batch, KILL_AFTER_BILLED, first)
        await ledger.set_provider(answering=False)
        await self._wait_until_recorded(stores, ledger, batch, runs)
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
            self.note(f"  interrupted mid-call: {call.workflow} at {call.step}")
        recorded_at_kill = {
            run.workflow: set(await stores.checkpointer.load(run.key)) for run in runs
        }
        await ledger.set_provider(answering=True)

        second = self._spawn(2)
        self.note(f"worker 2 started (pid {second.pid}); it resumes every unfinished run")
        await self._approve(runs, second)
        unfinished = await self._wait_finished(ledger, batch, runs, second)
        second.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(second.wait, 10.0)
        except subprocess.TimeoutExpired:
            second.kill()
        self.note("worker 2 stopped (SIGTERM, graceful)")

        report = Report(
            path=self.path,
            batch=batch,
            earlier_batches=earlier,
            killed_pid=first.pid,
            billed_before_kill=len(billed_before),
            in_flight_at_kill=len(in_flight),
            unfinished=unfinished,
        )
        await self._summarise(stores, ledger, runs, recorded_at_kill, report)
        report.seconds = time.monotonic() - self._started
        return report

    async def _create_runs(self, stores: Stores, batch: int) -> list[DemoRun]:
        runs: list[DemoRun] = []
        for tenant, name, agent_name, task, plan in RUNS:
            run_id = f"b{batch}-{name}"
            workflow = f"demo/{tenant}/{run_id}"
            await stores.state.put_run(
                RunRecord(
                    run_id=run_id,
                    tenant=tenant,
                    agent_name=agent_name,
                    metadata={"batch": batch, "task": task, "workflow": workflow},
                )
            )
            brief = Brief(
                batch=batch,
                tenant=tenant,
                run_id=run_id,
                task=task,
                plan=[Action.model_validate(action) for action in plan],
            )
            handle = await agent.start(brief, id=workflow, tenant=tenant)
            key = await workflow_at(stores.checkpointer, tenant, workflow)
            if key is None:
                raise DemoError(f"workflow {workflow!r} of {tenant!r} was not stored")
            runs.append(DemoRun(tenant, run_id, agent_name, workflow, task, plan, handle, key))
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
        self, ledger: Ledger, batch: int, count: int, process: subprocess.Popen[bytes]
    ) -> None:
        deadline = time.monotonic() + FINISH_TIMEOUT
        while True:
            billed = [c for c in await ledger.calls(batch) if c.billed]
            if len(billed) >= count:
                return
            await self._tell_retries(ledger, batch)
            self._check_alive(process, 1)
            if time.monotonic() > deadline:
                raise DemoError(f"worker 1 billed only {len(billed)} calls in time")
            await asyncio.sleep(0.05)

    async def _wait_until_recorded(
        self, stores: Stores, ledger: Ledger, batch: int, runs: list[DemoRun]
    ) -> None:
        """With the provider stalled no further call can be billed; wait until every
        billed call and its charge are recorded, so the kill lands only on calls in flight."""
        keys = {run.workflow: run.key for run in runs}
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            billed = [c for c in await ledger.calls(batch) if c.billed]
            loaded: dict[str, set[str]] = {}
            for call in billed:
                if call.workflow not in loaded:
                    key = keys[call.workflow]
                    loaded[call.workflow] = set(await stores.checkpointer.load(key))
            if all({c.step, f"usage:{c.step}"} <= loaded[c.workflow] for c in billed):
                return
            await asyncio.sleep(0.05)
        raise DemoError("worker 1 did not record its billed calls in time")

    async def _approve(self, runs: list[DemoRun], process: subprocess.Popen[bytes]) -> None:
        """Send the approval once the run waits for it (it holds no process meanwhile)."""
        run = next(r for r in runs if r.run_id.endswith(APPROVAL_RUN))
        deadline = time.monotonic() + FINISH_TIMEOUT
        info = await run.handle.status()
        while info.status is not WorkflowStatus.BLOCKED and time.monotonic() < deadline:
            self._check_alive(process, 2)
            await asyncio.sleep(0.05)
            info = await run.handle.status()
        waited = ""
        if info.status is WorkflowStatus.BLOCKED:
            since = datetime.now(UTC) - info.updated_at
            waited = f" after {since.total_seconds():.1f}s blocked, holding no process"
        await run.handle.send(APPROVAL, "ops@globex (demo)")
        self.note(f"approved send_email for {run.tenant}/{run.run_id}{waited}")

    async def _tell_retries(self, ledger: Ledger, batch: int) -> None:
        """Narrate each failed tool attempt once (its step's `durably.Retry` tries again)."""
        failed = [s for s in await ledger.steps(batch) if s.outcome == "failed"]
        for event in failed[self._retries_told :]:
            tenant, run_id = event.workflow.split("/")[1:3]
            self.note(
                f"{tenant}/{run_id}: {event.step} failed in {event.worker}; "
                "its durably.Retry tries again after a backoff"
            )
        self._retries_told = max(self._retries_told, len(failed))

    async def _wait_finished(
        self, ledger: Ledger, batch: int, runs: list[DemoRun], process: subprocess.Popen[bytes]
    ) -> list[str]:
        deadline = time.monotonic() + FINISH_TIMEOUT
        seen = 0
        pending = list(runs)
        told: set[str] = set()
        while pending and time.monotonic() < deadline:
            still: list[DemoRun] = []
            for run in pending:
                info = await run.handle.status()
                if not info.status.finished:
                    still.append(run)
                if info.status is WorkflowStatus.SLEEPING and run.workflow not in told:
                    told.add(run.workflow)
                    self.note(
                        f"{run.tenant}/{run.run_id} is sleeping (ctx.sleep in its plan); "
                        "no process holds it"
                    )
            pending = still
            await self._tell_retries(ledger, batch)
            done = len(runs) - len(pending)
            if done != seen:
                seen = done
                self.note(f"{done}/{len(runs)} runs finished")
            self._check_alive(process, 2)
            if pending:
                await asyncio.sleep(0.1)
        for run in runs:
            if run not in pending:
                await run.handle.result()  # the answer, decoded (raises if a run failed)
        return [f"{r.tenant}/{r.run_id}" for r in pending]

    async def _summarise(
        self,
        stores: Stores,
        ledger: Ledger,
        runs: list[DemoRun],
        recorded_at_kill: dict[str, set[str]],
        report: Report,
    ) -> None:
        calls = await ledger.calls(batch := report.batch)
        steps = await ledger.steps(batch)
        billed = [c for c in calls if c.billed]
        per_step = Counter((c.workflow, c.step) for c in billed)
        report.paid_calls_billed = len(billed)
        report.distinct_paid_steps = len(per_step)
        report.repeated_paid_steps = sorted(
            f"{wf} {step} x{n}" for (wf, step), n in per_step.items() if n > 1
        )
        report.recorded_before_kill_rerun = sorted(
            f"{c.workflow} {c.step}"
            for c in calls
            if c.worker != "demo-worker-1" and c.step in recorded_at_kill.get(c.workflow, set())
        )
        for run in runs:
            record = await stores.state.get_run(StateKey(tenant=run.tenant, id=run.run_id))
            info = await run.handle.status()
            mine = [s for s in steps if s.workflow == run.workflow]
            report.runs.append(
                RunSummary(
                    tenant=run.tenant,
                    run_id=run.run_id,
                    state=record.state.value if record else "missing",
                    status=info.status.value,
                    steps_run=sum(1 for s in mine if s.outcome == "ran"),
                    steps_replayed=sum(1 for s in mine if s.outcome == "replayed"),
                    paid_calls=sum(1 for c in billed if c.workflow == run.workflow),
                    tokens=record.usage.total_tokens if record else 0,
                    cost_micros=record.cost_micros if record else 0,
                    tool_retries=sum(1 for s in mine if s.outcome == "failed"),
                    tool_calls=record.usage.tool_calls if record else 0,
                )
            )


class DemoError(Exception):
    """The demo could not tell its story (a worker died early, or time ran out)."""


__all__ = ["FINISH_TIMEOUT", "RUNS", "Demo", "DemoError", "DemoRun", "Report", "RunSummary"]
