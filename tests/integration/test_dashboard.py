"""The dashboard over every backing, through HTTP in this process: each page shows what
the test stored, values escaped, the DSN never shown; the token and the action switch
refuse what they must; an action works end to end."""

from __future__ import annotations

import asyncio
import re
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

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from durably.app import App  # noqa: E402
from durably.dashboard import dashboard  # noqa: E402
from durably.stores.status import WorkflowStatus  # noqa: E402
from durably.stores.work import WorkItem  # noqa: E402
from tests.dashboard_world import HOSTILE, World, dsn_of, empty_redis, fill, register  # noqa: E402
from tests.pg_service import postgres_dsn  # noqa: E402

__all__ = ["postgres_dsn"]

BACKINGS = ["memory", "sqlite", "postgresql", "redis"]
TOKEN = "s3cret-token-for-tests"


@pytest.fixture(params=BACKINGS)
async def filled(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[App, World, str]]:
    backing = str(request.param)
    dsn = dsn_of(backing, tmp_path, request)
    if backing == "redis":
        await empty_redis()
    app = App(dsn)
    register(app)
    try:
        yield app, await fill(app), dsn
    finally:
        await app.close()


def client(site: Any) -> Any:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=site), base_url="http://127.0.0.1:8321"
    )


def rate_of(page: str, what: str, name: str) -> tuple[int, int]:
    """The completed and failed totals of the overview's throughput row of ``name``."""
    row = re.search(
        rf'data-what="{what}" data-name="{re.escape(name)}">.*?'
        r'class="n completed">([\d,]+)<.*?class="n failed[^"]*">([\d,]+)<',
        page,
        re.S,
    )
    assert row is not None, (what, name)
    return int(row.group(1).replace(",", "")), int(row.group(2).replace(",", ""))


def _secret_parts(dsn: str) -> list[str]:
    """The parts of a DSN a page must never show (the whole, and any password)."""
    parts = [dsn]
    found = re.match(r"\w+://[^:/@]*:([^@]+)@", dsn)
    if found:
        parts.append(found.group(1))
    return parts


async def test_every_page_shows_what_the_store_holds_escaped(
    filled: tuple[App, World, str],
) -> None:
    app, world, dsn = filled
    site = dashboard(app, queues=(world.queue,), allow_actions=True)
    async with client(site) as http:
        pages = {
            "overview": await http.get("/"),
            "queue": await http.get("/queue", params={"name": world.queue}),
            "workflows": await http.get("/workflows"),
            "hostile": await http.get("/workflow", params={"id": world.hostile}),
            "failed": await http.get("/workflow", params={"id": world.failed}),
            "waiting": await http.get("/workflow", params={"id": world.waiting}),
            "parent": await http.get("/workflow", params={"id": world.parent}),
            "runs": await http.get("/runs", params={"tenant": world.run_tenant}),
        }
    for name, page in pages.items():
        assert page.status_code == 200, (name, page.text[:500])
        assert "<script>window" not in page.text, name  # stored values are escaped
        for secret in _secret_parts(dsn):
            if secret not in ("memory://",):
                assert secret not in page.text, name
    assert world.queue in pages["overview"].text
    assert world.run_tenant in pages["overview"].text
    # The throughput panel: the dead letter, and the workflows that ended, per minute.
    assert rate_of(pages["overview"].text, "queue", world.queue) == (0, 1)
    assert rate_of(pages["overview"].text, "workflows", "dash-greet") == (2, 0)  # and a child
    assert rate_of(pages["overview"].text, "workflows", "dash-parent") == (1, 0)
    assert rate_of(pages["overview"].text, "workflows", "dash-broken") == (0, 1)
    assert world.dead_item in pages["queue"].text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in pages["queue"].text
    for workflow in (world.waiting, world.hostile, world.failed, world.parent):
        assert workflow in pages["workflows"].text
    assert "dash-shout#1" in pages["hostile"].text
    assert "completed" in pages["hostile"].text
    assert "boom" in pages["failed"].text
    assert "failed" in pages["failed"].text
    assert "blocked" in pages["waiting"].text
    assert "dash-greet" in pages["parent"].text  # the child, listed under Children
    assert world.run_id in pages["runs"].text
    assert "$0.0120" in pages["runs"].text
    assert HOSTILE not in pages["hostile"].text


@pytest.mark.parametrize("filled", ["sqlite"], indirect=True)
async def test_bad_and_hostile_parameters_are_answered_400_or_404_escaped(
    filled: tuple[App, World, str],
) -> None:
    app, world, _ = filled
    async with client(dashboard(app, queues=(world.queue,))) as http:
        missing = await http.get("/workflow", params={"id": f"nope{HOSTILE}"})
        bad = [
            await http.get("/workflows", params={"status": HOSTILE}),
            await http.get("/workflows", params={"after": "not-a-cursor"}),
            await http.get("/runs", params={"tenant": "\x00" + HOSTILE}),
            await http.get("/queue", params={"name": "x" * 5000}),
            await http.get("/workflow"),
        ]
    assert missing.status_code == 404
    assert HOSTILE not in missing.text
    assert [answer.status_code for answer in bad] == [400] * len(bad)
    for answer in bad:
        assert "<script>window" not in answer.text


@pytest.mark.parametrize("filled", ["sqlite"], indirect=True)
async def test_the_live_fragment_is_the_page_without_its_frame(
    filled: tuple[App, World, str],
) -> None:
    app, world, _ = filled
    async with client(dashboard(app, queues=(world.queue,))) as http:
        whole = await http.get("/queue", params={"name": world.queue})
        live = await http.get(
            "/queue", params={"name": world.queue}, headers={"X-Durably-Live": "1"}
        )
    assert "<html" in whole.text
    assert "<html" not in live.text
    assert world.dead_item in live.text


@pytest.mark.parametrize("filled", ["sqlite"], indirect=True)
async def test_requests_without_the_token_are_refused(filled: tuple[App, World, str]) -> None:
    app, world, _ = filled
    async with client(dashboard(app, token=TOKEN, queues=(world.queue,))) as http:
        assert (await http.get("/")).status_code == 401
        assert (await http.get("/", params={"token": "wrong"})).status_code == 401
        assert (await http.get("/", headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await http.get("/static/live.js")).status_code == 200  # no data in it
        by_header = await http.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert by_header.status_code == 200
        assert world.queue in by_header.text
        traded = await http.get("/workflows", params={"token": TOKEN, "kind": "dash-greet"})
        assert traded.status_code == 303
        assert "token" not in traded.headers["location"]
        assert traded.headers["location"] == "/workflows?kind=dash-greet"
        again = await http.get("/workflows")  # the cookie now carries it
        assert again.status_code == 200
        assert world.hostile in again.text


@pytest.mark.parametrize("filled", ["sqlite"], indirect=True)
async def test_actions_are_refused_unless_allowed_and_without_the_csrf_value(
    filled: tuple[App, World, str],
) -> None:
    app, world, _ = filled
    async with client(dashboard(app, queues=(world.queue,))) as http:
        page = await http.get("/workflow", params={"id": world.waiting})
        assert "Cancel</button>" not in page.text
        csrf = http.cookies["durably_dashboard_csrf"]
        refused = await http.post("/actions/cancel", data={"csrf": csrf, "id": world.waiting})
        assert refused.status_code == 403
        purge = {"csrf": csrf, "queue": world.queue}
        assert (await http.post("/actions/purge", data=purge)).status_code == 403
    async with client(dashboard(app, queues=(world.queue,), allow_actions=True)) as http:
        await http.get("/")
        csrf = http.cookies["durably_dashboard_csrf"]
        forged = await http.post("/actions/cancel", data={"csrf": "x" * 43, "id": world.waiting})
        assert forged.status_code == 403
        elsewhere = await http.post(
            "/actions/cancel",
            data={"csrf": csrf, "id": world.waiting},
            headers={"Origin": "http://evil.example"},
        )
        assert elsewhere.status_code == 403
        forged = await http.post("/actions/purge", data={"csrf": "x" * 43, "queue": world.queue})
        assert forged.status_code == 403
    status = await (await app.get_handle(world.waiting)).status()
    assert status.status is WorkflowStatus.BLOCKED  # nothing was cancelled
    stores = await app.stores()
    assert (await stores.queue.stats(queue=world.queue)).dead_lettered == 1  # nor purged


async def test_requeue_and_cancel_act_on_the_store(filled: tuple[App, World, str]) -> None:
    app, world, _ = filled
    stores = await app.stores()
    async with client(dashboard(app, queues=(world.queue,), allow_actions=True)) as http:
        await http.get("/")
        csrf = http.cookies["durably_dashboard_csrf"]
        answer = await http.post(
            "/actions/requeue",
            data={
                "csrf": csrf,
                "queue": world.queue,
                "tenant": world.tenant,
                "item": world.dead_item,
            },
        )
        assert answer.status_code == 303
        claimed = await stores.queue.claim(worker="after", queue=world.queue)
        assert claimed is not None
        assert claimed.id == world.dead_item
        assert claimed.attempts == 0
        assert claimed.failures
        await stores.queue.complete(claimed.id, tenant=claimed.tenant, worker="after")
        cancelled = await http.post(
            "/actions/cancel", data={"csrf": csrf, "id": world.waiting, "tenant": world.tenant}
        )
        assert cancelled.status_code == 303
        for n in range(3):  # three dead letters: one purged by id, then the rest
            await stores.queue.enqueue(
                WorkItem(id=f"doomed-{n}", tenant=world.tenant, queue=world.queue)
            )
            held = await stores.queue.claim(worker="after", queue=world.queue)
            assert held is not None
            await stores.queue.fail(
                held.id, tenant=held.tenant, worker="after", error="x", retryable=False
            )
        one = {"csrf": csrf, "queue": world.queue, "tenant": world.tenant, "item": "doomed-1"}
        purged = await http.post("/actions/purge", data=one)
        assert purged.status_code == 303
        assert "purged+doomed-1" in purged.headers["location"]
        left = await stores.queue.dead_letters(queue=world.queue)
        assert sorted(item.id for item in left) == ["doomed-0", "doomed-2"]
        rest = await http.post("/actions/purge", data={"csrf": csrf, "queue": world.queue})
        assert "purged+2+dead+letter" in rest.headers["location"]
    await app.run_until_idle()
    status = await (await app.get_handle(world.waiting)).status()
    assert status.status is WorkflowStatus.CANCELLED
    assert (await stores.queue.stats(queue=world.queue)).dead_lettered == 0


def test_binding_beyond_loopback_without_a_token_exits_2(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "durably",
            "dashboard",
            "--dsn",
            f"sqlite:///{tmp_path}/x.db",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "--token" in done.stderr
    assert "x.db" not in done.stderr


def _guide_example() -> str:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "dashboard.md").read_text()
    return str(re.findall(r"```python\n(.*?)```", guide, re.DOTALL)[0])


async def test_the_guides_mounting_example_serves_under_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _guide_example()
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(program, namespace)
    try:
        async with client(namespace["web"]) as http:
            refused = await http.get("/durably/")
            page = await http.get("/durably/", headers={"Authorization": "Bearer change-me"})
    finally:
        await namespace["app"].close()
    assert refused.status_code == 401
    assert page.status_code == 200
    assert 'href="/durably/queue?name=mail"' in page.text
    assert 'src="/durably/static/live.js"' in page.text


async def _created(dsn: str) -> None:
    async with App(dsn) as app:
        await app.stores()


def test_without_a_token_only_loopback_host_names_are_answered(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin"}
    command = [sys.executable, "-m", "durably", "dashboard", "--port", str(port)]
    command += ["--dsn", f"sqlite:///{tmp_path}/served.db"]
    asyncio.run(_created(f"sqlite:///{tmp_path}/served.db"))  # the command makes none
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None
                assert time.monotonic() < deadline
                time.sleep(0.1)
        rebound = urllib.request.Request(
            f"http://127.0.0.1:{port}/", headers={"Host": "evil.example"}
        )
        try:
            urllib.request.urlopen(rebound, timeout=5).close()
            status = 200
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == 400
    finally:
        server.terminate()
        server.wait(timeout=10)
