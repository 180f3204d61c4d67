"""Shared test configuration.

A backing whose server is missing skips its tests, unless DURABLY_REQUIRE_SERVICES=1
(set by CI), in which case the run fails instead.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVICES = os.environ.get("DURABLY_REQUIRE_SERVICES") == "1"


def service_missing(name: str, reason: str) -> None:
    """Skip (or, under DURABLY_REQUIRE_SERVICES=1, fail) because ``name`` is unreachable."""
    message = f"{name} unavailable: {reason}"
    if REQUIRE_SERVICES:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop the PostgreSQL databases the run created, outside every test's timeout."""
    from tests.pg_service import drop_created_databases

    drop_created_databases()
