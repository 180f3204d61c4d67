"""Redis servers for the tests: started on free loopback ports in a temporary directory.

One standalone server with persistence on (AOF), shared by the suites, and a 3-master
cluster. Each starts once per test process, on first use, and is killed at exit. Tests
that kill a server start their own with `start_server`.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import service_missing

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
_ROOT = Path(tempfile.mkdtemp(prefix="durably-redis-"))
_started: list[RedisServer] = []
_shared: dict[str, Any] = {}


def free_port() -> int:
    """A loopback port nobody listens on (and, for cluster buses, port + 10000 too)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + 10000 >= 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@dataclass
class RedisServer:
    """One redis-server process we own."""

    port: int
    directory: Path
    options: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--protected-mode",
                "no",
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn,
            ):
                conn.sendall(b"PING\r\n")
                if conn.recv(64).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def kill(self) -> None:
        """SIGKILL: no shutdown save, only what the AOF already holds survives."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.start()


def start_server(*options: str) -> RedisServer:
    """A fresh redis-server with ``options`` in its own directory; killed at exit."""
    if REDIS_SERVER is None:
        service_missing("Redis", "redis-server is not installed")
    port = free_port()
    directory = _ROOT / f"{port}-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    server = RedisServer(port, directory, options)
    server.start()
    _started.append(server)
    return server


def durable_server() -> RedisServer:
    """The shared standalone server, persistence on (appendonly yes)."""
    if "standalone" not in _shared:
        _shared["standalone"] = start_server("--appendonly", "yes", "--appendfsync", "everysec")
    server: RedisServer = _shared["standalone"]
    return server


async def flushed_database(db: int) -> str:
    """The URL of database ``db`` of the durable test server, emptied first (a suite that
    owns that database index on the shared server)."""
    redis = pytest.importorskip("redis.asyncio")
    url = f"{durable_server().url.rsplit('/', 1)[0]}/{db}"
    client = redis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()
    return url


def cluster_servers() -> list[RedisServer]:
    """The shared 3-master cluster (no replicas)."""
    if "cluster" not in _shared:
        if REDIS_CLI is None:
            service_missing("Redis", "redis-cli is not installed")
        nodes = [
            start_server(
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
            )
            for _ in range(3)
        ]
        assert REDIS_CLI is not None
        subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in nodes),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = [
                subprocess.run(
                    [REDIS_CLI, "-p", str(node.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
                for node in nodes
            ]
            if all("cluster_state:ok" in state for state in states):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the test cluster never reached cluster_state:ok")
        _shared["cluster"] = nodes
    servers: list[RedisServer] = _shared["cluster"]
    return servers


@atexit.register
def _stop_all() -> None:
    for server in _started:
        server.kill()
    shutil.rmtree(_ROOT, ignore_errors=True)


def unique_namespace() -> str:
    """A key prefix no other test uses (an empty, isolated namespace)."""
    return f"t{uuid.uuid4().hex[:12]}"


async def drop_namespaces(client: Any, namespaces: list[str]) -> None:
    """Delete every key under ``namespaces`` (the suites' cleanup)."""
    for ns in namespaces:
        async for key in client.scan_iter(match=f"{ns}:*", count=500):
            await client.unlink(key)


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    """The shared standalone server with persistence on."""
    return durable_server()


@pytest.fixture(scope="session")
def redis_cluster() -> list[RedisServer]:
    """The shared 3-master cluster."""
    return cluster_servers()


@pytest_asyncio.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[Any]:
    """A standalone client for one test."""
    from redis.asyncio import Redis

    client = Redis(host="127.0.0.1", port=redis_server.port)
    try:
        yield client
    finally:
        await client.aclose()


@pytest_asyncio.fixture
async def redis_cluster_client(redis_cluster: list[RedisServer]) -> AsyncIterator[Any]:
    """A cluster-aware client for one test."""
    from redis.asyncio.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0].port)
    await client.initialize()
    try:
        yield client
    finally:
        await client.aclose()


async def connect(mode: str) -> Any:
    """A client of ``mode`` ("standalone" or "cluster") over the shared servers."""
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    if mode == "standalone":
        return Redis(host="127.0.0.1", port=durable_server().port)
    cluster = RedisCluster(host="127.0.0.1", port=cluster_servers()[0].port)
    await cluster.initialize()
    return cluster


@pytest_asyncio.fixture(params=["standalone", "cluster"])
async def any_redis(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A standalone, then a cluster client; namespaces made by `namespace_for` are dropped."""
    client = await connect(str(request.param))
    namespaces: list[str] = []
    client.durably_namespaces = namespaces
    try:
        yield client
    finally:
        await drop_namespaces(client, namespaces)
        await client.aclose()


def namespace_for(client: Any) -> str:
    """A fresh namespace, remembered for cleanup by `any_redis`."""
    ns = unique_namespace()
    getattr(client, "durably_namespaces", []).append(ns)
    return ns
