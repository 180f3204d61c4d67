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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from durably.cli import main
from durably.postgres.settings import scrub_pool_logs
from tests.pg_service import postgres_dsn
from tests.redis_service import start_server

__all__ = ["postgres_dsn"]

SRC = str(Path(__file__).resolve().parents[2] / "src")
PASSWORD = "Sup3r-S3cret-pw"


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


# Each distinct path runs the real CLI as a process; the variants of a path run it in this
# process (the same streams: capsys sees what Python's last-resort log handler prints), as
# a loaded machine takes seconds to start each process.
IN_PROCESS = {"pg+psycopg database missing", "pg unknown driver", "pg+asyncpg unreachable"}
IN_PROCESS.add("redis malformed host")
RUNS = [(case, "--dsn") for case in CASES if case not in IN_PROCESS]
RUNS.append(("pg database missing", "DURABLY_DSN"))


@dataclass
class Finished:
    code: int
    out: str
    err: str
    seconds: float


@pytest.fixture(scope="module")
def finished(postgres_dsn: str) -> dict[tuple[str, str], Finished]:
    """Every case's CLI run, all started at once (each is a process of its own), so the
    module takes about as long as its slowest case."""
    started = time.monotonic()
    running = {}
    for case, via in RUNS:
        dsn = CASES[case][0](postgres_dsn)
        argv = ["runs", "list", "--tenant", "acme"] + (["--dsn", dsn] if via == "--dsn" else [])
        env = {**os.environ, "PYTHONPATH": SRC}
        if via == "DURABLY_DSN":
            env["DURABLY_DSN"] = dsn
        running[(case, via)] = subprocess.Popen(
            [sys.executable, "-m", "durably", *argv],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    done = {}
    for run, process in running.items():
        out, err = process.communicate(timeout=90)
        done[run] = Finished(process.returncode, out, err, time.monotonic() - started)
    return done


@pytest.mark.parametrize(("case", "via"), RUNS)
def test_the_cli_never_prints_the_password_of_a_dsn_it_cannot_use(
    finished: dict[tuple[str, str], Finished], case: str, via: str
) -> None:
    run = finished[(case, via)]
    _check(case, run.code, run.out, run.err)
    assert run.seconds < 60  # said at once, not after the pool's retries


@pytest.mark.parametrize("case", sorted(IN_PROCESS))
def test_the_cli_in_process_never_prints_the_password_of_a_dsn_it_cannot_use(
    postgres_dsn: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["runs", "list", "--tenant", "acme", "--dsn", CASES[case][0](postgres_dsn)]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    _check(case, code, out, err)


def _check(case: str, code: int, out: str, err: str) -> None:
    _, expected_code, says = CASES[case]
    assert code == expected_code, err
    assert PASSWORD not in out + err
    assert says in err
    assert "Traceback" not in err
    assert "error connecting in" not in err  # no pool retry lines


def test_a_refused_redis_login_does_not_show_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = start_server()
    try:
        subprocess.run(
            ["redis-cli", "-p", str(server.port), "config", "set", "requirepass", "the-right-one"],
            check=True,
            capture_output=True,
            timeout=10,
        )
        dsn = f"redis://default:{PASSWORD}@127.0.0.1:{server.port}/0"
        code = main(["queue", "stats", "--dsn", dsn])
    finally:
        server.kill()
    out, err = capsys.readouterr()
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
