"""The real ``durably`` process never shows a DSN's password, on any error path: a refused
login, an unreachable server, a host that does not parse, a ``+driver`` scheme, a database
that does not exist. Each case runs the CLI as a subprocess and reads both streams."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from durably.postgres.settings import scrub_pool_logs
from tests.pg_service import postgres_dsn
from tests.redis_service import start_server

__all__ = ["postgres_dsn"]

SRC = str(Path(__file__).resolve().parents[2] / "src")
PASSWORD = "Sup3r-S3cret-pw"


def run_cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "durably", *argv],
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def _pg(postgres_dsn: str, *, database: str, scheme: str = "postgresql", user: str = "root") -> str:
    parts = urlsplit(postgres_dsn)
    return f"{scheme}://{user}:{PASSWORD}@{parts.hostname}:{parts.port or 5432}/{database}"


CASES: dict[str, tuple[Callable[[str], str], int, str]] = {
    # name: (DSN from the test database's DSN, exit code, what stderr must say)
    "pg login refused": (
        lambda pg: _pg(pg, database="postgres", user="durably_no_such_role"),
        1,
        'role "durably_no_such_role" does not exist',
    ),
    "pg database missing": (
        lambda pg: _pg(pg, database="durably_no_such_db"),
        1,
        'database "durably_no_such_db" does not exist',
    ),
    "pg+psycopg database missing": (
        lambda pg: _pg(pg, database="durably_no_such_db", scheme="postgresql+psycopg"),
        1,
        'database "durably_no_such_db" does not exist',
    ),
    "pg+asyncpg database missing": (
        lambda pg: _pg(pg, database="durably_no_such_db", scheme="postgresql+asyncpg"),
        1,
        'database "durably_no_such_db" does not exist',
    ),
    "pg unknown driver": (
        lambda pg: _pg(pg, database="x", scheme="postgresql+pg8000"),
        2,
        "unknown PostgreSQL driver",
    ),
    "pg unreachable": (lambda _: f"postgresql://root:{PASSWORD}@127.0.0.1:1/app", 1, "cannot"),
    "pg+asyncpg unreachable": (
        lambda _: f"postgresql+asyncpg://root:{PASSWORD}@127.0.0.1:1/app",
        1,
        "cannot",
    ),
    "pg malformed host": (lambda _: f"postgresql://root:{PASSWORD}@[::1/app", 2, "malformed"),
    "redis unreachable": (lambda _: f"redis://default:{PASSWORD}@127.0.0.1:1/0", 1, "cannot"),
    "redis malformed host": (lambda _: f"redis://:{PASSWORD}@[::1:6379/0", 2, "malformed"),
}


VIA_ENV = {"pg database missing", "pg+asyncpg unreachable"}


@pytest.mark.parametrize(
    ("case", "via"),
    [(case, "--dsn") for case in CASES] + [(case, "DURABLY_DSN") for case in sorted(VIA_ENV)],
)
def test_the_cli_never_prints_the_password_of_a_dsn_it_cannot_use(
    postgres_dsn: str, case: str, via: str
) -> None:
    make, expected_code, says = CASES[case]
    dsn = make(postgres_dsn)
    if via == "--dsn":
        code, out, err, took = run_cli("runs", "list", "--tenant", "acme", "--dsn", dsn)
    else:
        code, out, err, took = run_cli("runs", "list", "--tenant", "acme", env={"DURABLY_DSN": dsn})
    assert code == expected_code, err
    assert PASSWORD not in out + err
    assert says in err
    assert "Traceback" not in err
    assert "error connecting in" not in err  # no pool retry lines
    assert took < 20  # said at once, not after the pool's retries


def test_a_refused_redis_login_does_not_show_the_password() -> None:
    server = start_server()
    try:
        subprocess.run(
            ["redis-cli", "-p", str(server.port), "config", "set", "requirepass", "the-right-one"],
            check=True,
            capture_output=True,
            timeout=10,
        )
        dsn = f"redis://default:{PASSWORD}@127.0.0.1:{server.port}/0"
        code, out, err, _ = run_cli("queue", "stats", "--dsn", dsn)
    finally:
        server.kill()
    assert code == 1, err
    assert PASSWORD not in out + err
    assert "refused the login" in err


def test_psycopg_pool_log_lines_have_the_password_scrubbed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = f"postgresql://root:{PASSWORD}@127.0.0.1:1/app"
    scrub_pool_logs(dsn)
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        logging.getLogger("psycopg.pool").warning("error connecting in %r: %s", "pool-1", dsn)
    assert caplog.records
    assert PASSWORD not in caplog.text
    assert "pool-1" in caplog.text
