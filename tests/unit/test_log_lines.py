"""Log lines name what they are about and when, in their text as well as their fields, and
`durably.logging.JsonFormatter` writes each as one parseable JSON object."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import datetime

import pytest

from durably import App, Context, Topic, WorkItem
from durably.clock import SystemClock
from durably.engine import Worker
from durably.logging import FieldsFormatter, JsonFormatter
from durably.memory import MemoryWorkQueue
from durably.stores.work import QueuePolicy

UTC_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00"
APPROVAL = Topic("approval", str)


async def _eventually(condition: object, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_a_retried_item_names_itself_and_a_readable_utc_retry_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = MemoryWorkQueue(SystemClock(), QueuePolicy(backoff_seconds=60))
    worker = Worker(poll_seconds=0.05, grace_seconds=0.1)

    async def handler(item: WorkItem) -> None:
        raise RuntimeError("upstream down")

    worker.handle(queue, handler, name="mail")
    await queue.enqueue(WorkItem(id="invoice-7", tenant="acme", queue="mail"))
    with caplog.at_level(logging.INFO, logger="durably.worker"):
        serving = asyncio.create_task(worker.run(install_signal_handlers=False))
        try:
            await _eventually(lambda: any("failed" in r.getMessage() for r in caplog.records))
        finally:
            worker.stop()
            await serving
    (record,) = [r for r in caplog.records if "failed" in r.getMessage()]
    text = record.getMessage()
    assert "work item 'invoice-7' of tenant 'acme' failed" in text
    assert re.search(f"retrying at {UTC_TIME}", text), text
    assert not re.search(r"\d{10}\.\d", text)  # no raw epoch
    fields = vars(record)
    assert (fields["item"], fields["tenant"], fields["queue"]) == ("invoice-7", "acme", "mail")
    assert fields["attempt"] == 1
    assert fields["retry_at"] in text
    datetime.fromisoformat(fields["retry_at"])


async def test_a_blocked_workflow_names_its_id_and_what_it_waits_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App("memory://")

    @app.step(name="draft")
    async def draft() -> str:
        return "text"

    @app.workflow(name="review")
    async def review(ctx: Context) -> str:
        await draft()
        return str(await ctx.recv(APPROVAL))

    async with app:
        handle = await review.start(id="ticket-42")
        with caplog.at_level(logging.INFO, logger="durably.worker"):
            await app.run_until_idle(advance=False)
        assert handle.id == "ticket-42"
    (record,) = [r for r in caplog.records if "blocked" in r.getMessage()]
    text = record.getMessage()
    assert "workflow 'ticket-42' blocked waiting for durably:recv:approval#1" in text, text
    assert "steps run, 0 replayed from records" in text
    assert vars(record)["workflow"] == "ticket-42"
    assert vars(record)["kind"] == "review"


def test_the_json_formatter_writes_a_parseable_line_with_fields_and_errors() -> None:
    logger = logging.getLogger("durably.test")
    record = logger.makeRecord(
        "durably.worker",
        logging.WARNING,
        __file__,
        1,
        "workflow %r failed: %s",
        ("ticket-42", "boom"),
        None,
        extra={"workflow": "ticket-42", "kind": "review", "odd": object(), "text": "é <b>"},
    )
    try:
        raise ValueError("why")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "workflow 'ticket-42' failed: boom"
    assert parsed["level"] == "WARNING"
    assert parsed["logger"] == "durably.worker"
    assert (parsed["workflow"], parsed["kind"], parsed["text"]) == ("ticket-42", "review", "é <b>")
    assert parsed["odd"].startswith("<object object")
    assert "ValueError: why" in parsed["exception"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", parsed["time"])


def test_the_text_formatter_shows_utc_times_and_the_fields() -> None:
    record = logging.getLogger("durably.test").makeRecord(
        "durably.worker", logging.INFO, __file__, 1, "hello", (), None, extra={"item": "a"}
    )
    record.created = 0.0
    record.msecs = 0.0
    line = FieldsFormatter("%(asctime)s %(message)s").format(record)
    assert line == "1970-01-01T00:00:00.000Z hello [item='a']"
