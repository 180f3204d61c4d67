"""The dashboard in a real browser (Chromium, headless, driven by Playwright) over SQLite
and PostgreSQL: every page renders what the test stored, a requeued dead letter runs, a
waiting workflow is cancelled, a stored ``<script>`` stays text, a request without the
token and an action of a read-only dashboard are refused. Screenshots of each page go to
``tmp/artifacts/dashboard/<backing>/`` (``$DURABLY_ARTIFACTS`` overrides ``tmp/artifacts``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durably.app import App
from durably.stores.status import WorkflowStatus
from durably.stores.work import WorkItem
from tests.conftest import service_missing
from tests.dashboard_world import HOSTILE, World, dsn_of, fill, register
from tests.pg_service import postgres_dsn

__all__ = ["postgres_dsn"]

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "browser-test-token"
WAIT_MS = 15_000


def artifacts(backing: str) -> Path:
    base = Path(os.environ.get("DURABLY_ARTIFACTS", ROOT / "tmp" / "artifacts"))
    where = base / "dashboard" / backing
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def chromium() -> str:
    """One headless Debian Chromium for the module (never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError:
        service_missing("Playwright", "not installed (the browser extra)")
    if not Path(CHROMIUM).exists():
        service_missing("Chromium", f"{CHROMIUM} is missing (apt-get install chromium)")
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """``durably dashboard`` in a subprocess, as a user starts it."""

    def __init__(self, dsn: str, queue: str, log: Path, *extra: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DURABLY_DASHBOARD_TOKEN": TOKEN}
        command = [sys.executable, "-m", "durably", "dashboard", "--dsn", dsn]
        command += ["--port", str(self.port), "--queue", queue, *extra]
        self.log = log
        command += ["--refresh", "0.5"]
        self._out = log.open("w")
        self.process = subprocess.Popen(command, env=env, stdout=self._out, stderr=self._out)

    def wait(self) -> Server:
        """Return once it answers (it failing to start fails the test)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.base}/static/live.js", timeout=2).close()
                return self
            except (urllib.error.URLError, ConnectionError):
                if self.process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
            self.stop()
            raise AssertionError(f"the dashboard did not start: {self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, App, World, str]]:
    backing = str(request.param)
    dsn = dsn_of(backing, tmp_path, request)
    app = App(dsn)
    register(app)
    try:
        yield backing, app, await fill(app), dsn
    finally:
        await app.close()


async def test_every_page_in_a_browser_and_its_actions(
    chromium: str, world: tuple[str, App, World, str], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    backing, app, w, dsn = world
    shots = artifacts(backing)
    server = Server(dsn, w.queue, tmp_path / "dashboard.log", "--allow-actions")
    # Over SQLite, a second dashboard without --allow-actions, started alongside.
    reader = Server(dsn, w.queue, tmp_path / "reader.log") if backing == "sqlite" else None
    try:
        server.wait()
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                context = await browser.new_context(viewport={"width": 1200, "height": 800})
                page = await context.new_page()
                ran: list[str] = []

                async def answer(dialog: Any) -> None:  # only the purge's confirm may ask
                    ran.append(f"{dialog.type}: {dialog.message}")
                    await dialog.accept()

                page.on("dialog", answer)

                refused = await page.goto(f"{server.base}/")
                assert refused is not None
                assert refused.status == 401  # no token yet

                await page.goto(f"{server.base}/?token={TOKEN}")
                assert "token" not in page.url
                await expect(page.locator("h1")).to_have_text("Overview")
                await expect(page.get_by_role("link", name=w.queue).first).to_be_visible()
                await expect(page.get_by_text(w.run_tenant)).to_be_visible()
                # The throughput panel counts what the fill finished: its dead letter, and
                # the greeting, the parent's child and the parent, the failed one.
                queue_rate = page.locator(f'tr.rate[data-what="queue"][data-name="{w.queue}"]')
                await expect(queue_rate.locator(".failed")).to_have_text("1")
                await expect(queue_rate.locator(".completed")).to_have_text("0")
                greet_rate = page.locator('tr.rate[data-name="dash-greet"]')
                await expect(greet_rate.locator(".completed")).to_have_text("2")
                broken_rate = page.locator('tr.rate[data-name="dash-broken"]')
                await expect(broken_rate.locator(".failed")).to_have_text("1")
                await page.screenshot(path=shots / "overview.png", full_page=True)

                await page.goto(f"{server.base}/workflows")
                for workflow in (w.waiting, w.hostile, w.failed, w.parent):
                    await expect(
                        page.get_by_role("link", name=workflow, exact=True)
                    ).to_be_visible()
                await page.screenshot(path=shots / "workflows.png", full_page=True)

                await page.get_by_role("link", name=w.hostile, exact=True).click()
                await expect(page.locator("#status")).to_have_text("completed")
                await expect(page.get_by_text(HOSTILE).first).to_be_visible()  # as text
                await page.screenshot(path=shots / "workflow.png", full_page=True)
                assert await page.evaluate("typeof window.__pwned") == "undefined"

                await page.goto(f"{server.base}/workflow?id={w.failed}")
                await expect(page.locator("#status")).to_have_text("failed")
                await page.screenshot(path=shots / "workflow-failed.png", full_page=True)

                await page.goto(f"{server.base}/runs?tenant={w.run_tenant}")
                await expect(page.get_by_text(w.run_id)).to_be_visible()
                await page.screenshot(path=shots / "runs.png", full_page=True)

                # Requeue the dead letter; a worker runs it; the live part shows it gone.
                await page.goto(f"{server.base}/queue?name={w.queue}")
                await expect(page.get_by_text(w.dead_item)).to_be_visible()
                await expect(page.get_by_text(f"refused {HOSTILE}")).to_be_visible()
                await page.screenshot(path=shots / "queue.png", full_page=True)
                await page.get_by_role("button", name="Requeue").click()
                await expect(page.locator(".notice")).to_have_text(f"requeued {w.dead_item}")
                stores = await app.stores()
                claimed = await stores.queue.claim(worker="browser-test", queue=w.queue)
                assert claimed is not None
                assert claimed.id == w.dead_item
                await stores.queue.complete(
                    claimed.id, tenant=claimed.tenant, worker="browser-test"
                )
                await expect(page.get_by_text("No dead letters.")).to_be_visible(timeout=WAIT_MS)

                # Two new dead letters appear without a reload; one is purged by its
                # button, then the rest by the queue's; a forged form is refused.
                for n in range(2):
                    await _dead_letter(stores, w, f"doomed-{n}")
                doomed = page.locator("tr.dead-letter", has_text="doomed-1")
                await expect(doomed).to_be_visible(timeout=WAIT_MS)
                assert await _forged_purge(page, w.queue) == 403
                await doomed.get_by_role("button", name="Purge").click()
                await expect(page.locator(".notice")).to_have_text("purged doomed-1")
                await expect(page.locator("tr.dead-letter")).to_have_count(1)
                await page.get_by_role("button", name="Purge every dead letter").click()
                await expect(page.locator(".notice")).to_have_text("purged 1 dead letter(s)")
                await expect(page.get_by_text("No dead letters.")).to_be_visible()
                assert await stores.queue.dead_letters(queue=w.queue) == []

                # The overview's panel counts the requeued item's completion and the two
                # dead letters, and follows a completion made while it is open.
                await page.goto(f"{server.base}/")
                await expect(queue_rate.locator(".completed")).to_have_text("1")
                await expect(queue_rate.locator(".failed")).to_have_text("3")
                await stores.queue.enqueue(WorkItem(id="late", tenant=w.tenant, queue=w.queue))
                late = await stores.queue.claim(worker="browser-test", queue=w.queue)
                assert late is not None
                await stores.queue.complete(late.id, tenant=late.tenant, worker="browser-test")
                await expect(queue_rate.locator(".completed")).to_have_text("2", timeout=WAIT_MS)

                # Cancel the workflow waiting on a message; its pass ends it.
                await page.goto(f"{server.base}/workflow?id={w.waiting}")
                await expect(page.locator("#status")).to_have_text("blocked")
                await page.get_by_role("button", name="Cancel").click()
                await expect(page.locator(".notice")).to_have_text("cancel asked")
                await app.run_until_idle()
                await expect(page.locator("#status")).to_have_text("cancelled", timeout=WAIT_MS)
                status = await (await app.get_handle(w.waiting)).status()
                assert status.status is WorkflowStatus.CANCELLED

                assert await page.evaluate("typeof window.__pwned") == "undefined"
                # No script opened a dialog either: only the purge's confirm asked.
                assert ran == [
                    f"confirm: Delete every dead letter of {w.queue}? They cannot be requeued "
                    "after."
                ]
                content = await page.content()
                assert dsn not in content

                if reader is not None:
                    await _dead_letter(stores, w, "kept")
                    await _read_only_refuses(await browser.new_page(), reader.wait(), w)
                    kept = await stores.queue.dead_letters(queue=w.queue)
                    assert [item.id for item in kept] == ["kept"]
            finally:
                await browser.close()
    finally:
        server.stop()
        if reader is not None:
            reader.stop()
    assert dsn not in server.log.read_text()


async def _dead_letter(stores: Any, w: World, item_id: str) -> None:
    """Queue ``item_id`` and fail it for good."""
    await stores.queue.enqueue(WorkItem(id=item_id, tenant=w.tenant, queue=w.queue))
    held = await stores.queue.claim(worker="browser-test", queue=w.queue)
    assert held is not None
    await stores.queue.fail(
        held.id, tenant=held.tenant, worker="browser-test", error="gone", retryable=False
    )


async def _forged_purge(page: Any, queue: str) -> int:
    """The status of a purge posted from the page with a CSRF value not its cookie's."""
    status: int = await page.evaluate(
        """async (queue) => {
            const body = new URLSearchParams({queue: queue, csrf: 'x'.repeat(43)});
            const r = await fetch('/actions/purge', {method: 'POST', body: body});
            return r.status;
        }""",
        queue,
    )
    return status


async def _read_only_refuses(page: Any, reader: Server, w: World) -> None:
    """A dashboard without --allow-actions shows no button, and refuses a POST made by
    hand from its own page; the waiting workflow is left as it was."""
    from playwright.async_api import expect

    await page.goto(f"{reader.base}/workflow?id={w.parent}&token={TOKEN}")
    await expect(page.locator("#status")).to_have_text("completed")
    await expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    answer = await page.evaluate(
        """async (id) => {
            const body = new URLSearchParams({id: id, csrf: 'x'});
            const r = await fetch('/actions/resume', {method: 'POST', body: body});
            return r.status;
        }""",
        w.parent,
    )
    assert answer == 403
    await page.goto(f"{reader.base}/queue?name={w.queue}")
    await expect(page.locator("tr.dead-letter", has_text="kept")).to_be_visible()
    await expect(page.get_by_role("button", name="Purge")).to_have_count(0)
    assert await _forged_purge(page, w.queue) == 403
