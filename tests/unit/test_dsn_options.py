"""The pool options a DSN carries (``?pool_size=``, ``?pool_timeout=``): read, bounded,
taken out of the URL the driver gets, and refused before any I/O where they make no sense."""

from __future__ import annotations

import pytest

import durably
from durably.errors import DsnError
from durably.stores.dsn import MAX_POOL_SIZE, MAX_POOL_TIMEOUT, parse

PASSWORD = "pw-0f-the-pool"


def test_pool_options_are_read_and_taken_out_of_the_url() -> None:
    parsed = parse(f"postgresql://u:{PASSWORD}@h/db?sslmode=require&pool_size=7&pool_timeout=2.5")
    assert (parsed.pool_size, parsed.pool_timeout) == (7, 2.5)
    assert parsed.url.get_secret_value() == f"postgresql://u:{PASSWORD}@h/db?sslmode=require"
    redis = parse("redis://127.0.0.1:6379/0?pool_timeout=30&socket_timeout=5&pool_size=200")
    assert (redis.pool_size, redis.pool_timeout) == (200, 30.0)
    assert redis.url.get_secret_value() == "redis://127.0.0.1:6379/0?socket_timeout=5"


def test_a_dsn_without_pool_options_leaves_them_to_the_backing() -> None:
    parsed = parse("postgresql://h/db")
    assert (parsed.pool_size, parsed.pool_timeout) == (None, None)


@pytest.mark.parametrize(
    "query",
    [
        "pool_size=0",
        "pool_size=-3",
        "pool_size=ten",
        "pool_size=1.5",
        f"pool_size={MAX_POOL_SIZE + 1}",
        "pool_size=" + "9" * 5000,  # longer than int() reads
        "pool_size=",
        "pool_size=٣",  # a digit, but not an ASCII one
        "pool_timeout=0",
        "pool_timeout=-1",
        "pool_timeout=nan",
        "pool_timeout=inf",
        f"pool_timeout={MAX_POOL_TIMEOUT + 1}",
        "pool_timeout=soon",
        "pool_timeout=",
    ],
)
@pytest.mark.parametrize("base", [f"postgresql://u:{PASSWORD}@h/db", "redis://127.0.0.1:6379/0"])
def test_a_pool_option_out_of_bounds_is_refused_before_any_io(base: str, query: str) -> None:
    with pytest.raises(DsnError, match=query.split("=")[0]) as caught:
        durably.App(f"{base}?{query}")
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize("name", ["max_connections", "timeout"])
def test_redis_clients_own_pool_names_are_refused_for_ours(name: str) -> None:
    with pytest.raises(DsnError, match="pool_size= and pool_timeout="):
        parse(f"redis://127.0.0.1:6379/0?{name}=5")


@pytest.mark.parametrize(
    "dsn",
    ["memory://?pool_size=3", "sqlite:///app.db?pool_size=3", "sqlite:///app.db?mode=ro"],
)
def test_a_memory_or_sqlite_dsn_takes_no_options(dsn: str) -> None:
    with pytest.raises(DsnError, match="takes no options"):
        durably.App(dsn)


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?bogus=1",
        f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:1/db?sslmode=require&bogus=1",
        f"redis://u:{PASSWORD}@127.0.0.1:1/0?bogus=1",
        f"rediss://u:{PASSWORD}@127.0.0.1:1/0?ssl_cert_reqs=none&bogus=1",
    ],
)
async def test_an_option_the_driver_does_not_take_is_refused_before_connecting(dsn: str) -> None:
    # Nothing listens on port 1: reaching it would be StoreUnavailableError instead.
    with pytest.raises(DsnError, match="bogus") as caught:
        await durably.open_stores(dsn)
    assert PASSWORD not in str(caught.value)
