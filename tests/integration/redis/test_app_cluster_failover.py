"""The App on a Redis Cluster of 3 masters and 3 replicas (started here) opened from a
``redis+cluster://`` DSN, with a master killed while orders run: gathers of steps, a child
workflow each and a message each, over several tenants. Every order ends with the right
result, and every step is paid once, counted from a ledger file the steps append to."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.redis_service import REDIS_CLI, RedisServer, start_server
from tests.scale.shop import EXPECTED, NOTE, build, expected_keys, ledger_counts

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

ORDERS = 24
TENANTS = 4


def _cli(port: int, *args: str) -> str:
    assert REDIS_CLI is not None
    return subprocess.run(
        [REDIS_CLI, "-p", str(port), *args], capture_output=True, text=True, check=False
    ).stdout


def start_replicated_cluster() -> list[RedisServer]:
    """Six nodes, three masters with a replica each, failing over within about a second."""
    nodes = [
        start_server(
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1000",
            "--cluster-replica-validity-factor",
            "0",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        )
        for _ in range(6)
    ]
    assert REDIS_CLI is not None
    subprocess.run(
        [
            REDIS_CLI,
            "--cluster",
            "create",
            *(f"127.0.0.1:{node.port}" for node in nodes),
            "--cluster-replicas",
            "1",
            "--cluster-yes",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ok = all("cluster_state:ok" in _cli(node.port, "cluster", "info") for node in nodes)
        linked = sum("master_link_status:up" in _cli(n.port, "info", "replication") for n in nodes)
        if ok and linked == 3:
            return nodes
        time.sleep(0.1)
    raise RuntimeError("the replicated test cluster never came up")


def masters(nodes: list[RedisServer]) -> list[RedisServer]:
    """The nodes serving slots now."""
    return [node for node in nodes if "role:master" in _cli(node.port, "info", "replication")]


async def test_orders_end_right_and_pay_once_across_a_killed_master(tmp_path: Path) -> None:
    nodes = start_replicated_cluster()
    try:
        ledger = tmp_path / "ledger"
        dsn = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes[:3]) + "/"
        app, order = build(dsn, ledger)
        async with app:
            run = uuid.uuid4().hex[:8]
            handles = [
                await order.start(n, id=f"order-{run}-{n}", tenant=f"tenant-{n % TENANTS}")
                for n in range(ORDERS)
            ]
            for handle in handles:
                await handle.send(NOTE, "paid")
            serving = asyncio.create_task(app.serve(signals=False, poll=0.1, concurrency=8))
            try:
                # Mid-run: some steps paid, most not.
                deadline = time.monotonic() + 60
                while sum(ledger_counts(ledger).values()) < ORDERS and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                victim = masters(nodes)[0]
                victim.kill()
                results = await asyncio.gather(*(h.result(timeout=90) for h in handles))
            finally:
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)
            assert len(masters([n for n in nodes if n is not victim])) == 3  # one took over
        assert results == [EXPECTED] * ORDERS
        paid = ledger_counts(ledger)
        wanted = expected_keys([h.id for h in handles])
        assert set(paid) == wanted
        assert {key: count for key, count in paid.items() if count != 1} == {}
    finally:
        for node in nodes:
            node.kill()
