"""PgBouncer for the tests: Debian's ``pgbouncer`` in transaction pooling mode, started once
per test process on a free loopback port in front of the test PostgreSQL, with a config
generated in a temporary directory, and killed at exit. Missing, the tests that need it are
skipped (or fail, under DURABLY_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from tests.conftest import service_missing
from tests.pg_service import ADMIN_DSN

PGBOUNCER = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
)
# Server connections PgBouncer opens per database and user: what every client of the
# tests shares, whatever their number (the server's max_connections is shared too).
SERVER_POOL_SIZE = 8
_running: dict[str, tuple[subprocess.Popen[bytes], int, Path]] = {}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pgbouncer_port(mode: str = "transaction") -> int:
    """The port of this process's PgBouncer in ``mode`` pooling (started on first use)."""
    if mode in _running:
        return _running[mode][1]
    if PGBOUNCER is None:
        service_missing("PgBouncer", "pgbouncer is not installed (apt-get install pgbouncer)")
    assert PGBOUNCER is not None
    server = urlsplit(ADMIN_DSN)
    user = server.username or "root"
    directory = Path(tempfile.mkdtemp(prefix="durably-pgbouncer-"))
    directory.chmod(0o777)  # PgBouncer started by root runs as nobody and logs here
    port = _free_port()
    (directory / "users.txt").write_text(f'"{user}" ""\n')
    (directory / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {directory / 'users.txt'}",
                f"pool_mode = {mode}",
                f"default_pool_size = {SERVER_POOL_SIZE}",
                "max_client_conn = 400",
                f"logfile = {directory / 'pgbouncer.log'}",
                "",
            ]
        )
    )
    for path in directory.iterdir():
        path.chmod(0o666)
    as_nobody = ["-u", "nobody"] if os.geteuid() == 0 else []
    process = subprocess.Popen(
        [PGBOUNCER, *as_nobody, str(directory / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited at start: {_log(directory)}")
        time.sleep(0.05)
    else:
        process.kill()
        raise RuntimeError("pgbouncer did not start listening")
    _running[mode] = (process, port, directory)
    return port


def _log(directory: Path) -> str:
    with contextlib.suppress(OSError):
        return (directory / "pgbouncer.log").read_text()[-2000:]
    return ""


def through_pgbouncer(direct: str, mode: str = "transaction", *, listen: bool = False) -> str:
    """``direct``'s database through PgBouncer in ``mode`` pooling, as a durably DSN with
    ``?pooler=``, and ``?listen=`` naming ``direct`` itself when ``listen``."""
    parts = urlsplit(direct)
    location = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{pgbouncer_port(mode)}"
    netloc = f"{location[0]}@{host}" if len(location) == 2 else host
    query = f"pooler={mode}"
    if listen:
        query += f"&listen={quote(direct, safe='')}"
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@atexit.register
def _stop_all() -> None:
    for process, _, directory in _running.values():
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
            if process.poll() is None:
                process.kill()
        shutil.rmtree(directory, ignore_errors=True)


__all__ = ["PGBOUNCER", "SERVER_POOL_SIZE", "pgbouncer_port", "through_pgbouncer"]
