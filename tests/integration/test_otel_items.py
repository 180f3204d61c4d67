"""A work item enqueued inside a producer span is handled inside a consumer span that
continues its trace, with its outcome; the handler's own spans nest under it.

Run as a script, this module is the traced process: ``python test_otel_items.py SPANS``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_items_handling_continues_the_trace_its_enqueue_began(tmp_path: Path) -> None:
    from tests.span_files import read_spans

    spans_file = tmp_path / "spans.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, __file__, str(spans_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spans = read_spans([spans_file])
    by_id = {s["span_id"]: s for s in spans}
    sends = {s["attributes"]["messaging.message.id"]: s for s in spans if s["kind"] == "PRODUCER"}
    handled = [s for s in spans if s["kind"] == "CONSUMER"]
    assert sorted(sends) == ["bad", "good"]
    assert {s["name"] for s in sends.values()} == {"enqueue mail"}
    outcomes = {}
    for span in handled:
        item = span["attributes"]["messaging.message.id"]
        assert span["name"] == "process mail"
        assert span["parent_id"] == sends[item]["span_id"]  # the producer's context travelled
        assert span["trace_id"] == sends[item]["trace_id"]
        assert span["attributes"]["messaging.operation.type"] == "process"
        outcomes[item] = span["attributes"]["durably.outcome"]
        assert span["status"] == ("UNSET" if item == "good" else "ERROR")
    assert outcomes == {"good": "completed", "bad": "dead_lettered"}
    inner = [s for s in spans if s["name"] == "send the mail"]
    assert len(inner) == 2
    for span in inner:  # the handler's own spans nest under its item's
        assert by_id[span["parent_id"]]["name"] == "process mail"


async def _scenario() -> None:
    from opentelemetry import trace

    from durably import WorkItem
    from durably.clock import SystemClock
    from durably.engine import Worker
    from durably.memory import MemoryWorkQueue
    from durably.otel import enqueuing
    from durably.stores.work import QueuePolicy

    queue = MemoryWorkQueue(SystemClock(), QueuePolicy(max_attempts=1))
    tracer = trace.get_tracer("mailer")
    seen: list[str] = []

    async def handler(item: WorkItem) -> None:
        with tracer.start_as_current_span("send the mail"):
            seen.append(item.id)
            if item.id == "bad":
                raise RuntimeError("no such mailbox")

    worker = Worker(poll_seconds=0.05, grace_seconds=0.5)
    worker.handle(queue, handler, name="mail")
    for name in ("good", "bad"):
        with enqueuing(WorkItem(id=name, tenant="acme", queue="mail")) as item:
            assert "durably.traceparent" in item.payload
            await queue.enqueue(item)
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    for _ in range(600):
        stats = await queue.stats(queue="mail")
        if len(seen) == 2 and stats.claimed == 0 and stats.depth == 0:
            break
        await asyncio.sleep(0.05)
    worker.stop()
    await serving


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from tests.span_files import trace_to

    trace_to(Path(sys.argv[1]))
    asyncio.run(_scenario())
