"""The DSN forms for running at scale, read with no I/O: ``redis+cluster://`` with its
nodes, ``?pooler=`` and ``?listen=`` on PostgreSQL; bad forms refused by name, and the
listening DSN's password kept out of every printable form. Also `durably doctor`'s
arithmetic."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from durably.cli.doctor import budget
from durably.errors import DsnError
from durably.stores.dsn import describe, parse, redacted, scrub

LISTEN = "postgresql://root:L1sten-pw@db.internal:5432/app"
POOLED = (
    f"postgresql://app:P00l-pw@bouncer:6432/app?pooler=transaction&listen={quote(LISTEN, safe='')}"
)


def test_a_cluster_dsn_names_every_node_and_keeps_the_first_as_the_url() -> None:
    parsed = parse("redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001/?pool_size=7&durable=false")
    assert parsed.backing == "redis"
    assert parsed.cluster == ("10.0.0.1:7000", "10.0.0.2:7001")
    assert parsed.url.get_secret_value() == "redis://u:pw@10.0.0.1:7000/"
    assert (parsed.pool_size, parsed.durable) == (7, False)
    assert describe("redis+cluster://10.0.0.1:7000,10.0.0.2:7001") == (
        "redis cluster 10.0.0.1:7000,10.0.0.2:7001"
    )
    assert parse("rediss+cluster://h:1?pool_timeout=2").url.get_secret_value() == "rediss://h:1/"


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        ("redis+cluster://a:1,,b:2/", "host:port"),
        ("redis+cluster://a:1,b/", "host:port"),
        ("redis+cluster://a:1,u:p@b:2/", "host:port"),
        ("redis+cluster://a:1/3", "database 0"),
        ("redis+cluster://a:1/?db=2", "database 0"),
        ("redis+cluster://" + ",".join(f"h{n}:1" for n in range(65)), "at most 64"),
        ("redis://h/?pooler=transaction", "pooler="),
        ("redis://h/?listen=postgresql://h/db", "listen="),
        ("postgresql://h/db?pooler=statement", "pooler="),
        ("postgresql://h/db?listen=redis%3A%2F%2Fh", "listen="),
        (
            "postgresql://h/db?listen=" + quote("postgresql://h/db?pooler=session", safe=""),
            "listen=",
        ),
    ],
)
def test_malformed_scale_forms_are_refused_naming_the_part(dsn: str, says: str) -> None:
    with pytest.raises(DsnError, match=says.replace("?", r"\?")):
        parse(dsn)


def test_a_pooled_dsn_carries_its_pooler_and_a_secret_listening_dsn() -> None:
    parsed = parse(POOLED)
    assert parsed.pooler == "transaction"
    assert parsed.listen is not None
    assert parsed.listen.get_secret_value() == LISTEN
    assert parsed.url.get_secret_value() == "postgresql://app:P00l-pw@bouncer:6432/app"
    assert "L1sten-pw" not in repr(parsed)
    assert describe(POOLED) == "postgresql bouncer:6432/app (through a transaction pooler)"


def test_neither_password_of_a_pooled_dsn_is_printed() -> None:
    shown = redacted(POOLED)
    assert "P00l-pw" not in shown
    assert "L1sten-pw" not in shown
    assert "db.internal" in shown  # still says where it listens
    message = scrub(f"failed: {LISTEN} / L1sten-pw / {POOLED}", POOLED)
    assert "L1sten-pw" not in message
    assert "P00l-pw" not in message


@pytest.mark.parametrize(
    ("dsn", "pooled", "listening"),
    [
        ("postgresql://h/db?pool_size=5", 5, 1),
        ("postgresql://h/db", 10, 1),
        ("postgresql+asyncpg://h/db", 10, 0),
        (POOLED, 0, 1),
        ("postgresql://h/db?pooler=transaction", 0, 0),
        ("postgresql://h/db?pooler=session&pool_size=4", 4, 1),
        ("redis://h/0?pool_size=20", 20, 0),
        ("redis+cluster://a:1,b:2/", 50, 0),
        ("sqlite:///x.db", 0, 0),
    ],
)
def test_the_connection_budget_per_process(dsn: str, pooled: int, listening: int) -> None:
    planned = budget(dsn)
    assert (planned.pooled, planned.listening) == (pooled, listening)
    assert planned.per_process == pooled + listening
