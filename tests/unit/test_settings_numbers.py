"""Every numeric setting of every backing refuses a bool (pydantic alone takes ``True`` as
1), and still takes a number, or a number's text as a DSN's query carries it."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from durably.postgres.settings import PostgresStoreSettings
from durably.redis.settings import RedisStoreSettings
from durably.sqlite.settings import SqliteStoreSettings

BASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (PostgresStoreSettings, {"dsn": SecretStr("postgresql://127.0.0.1/db")}),
    (RedisStoreSettings, {"dsn": SecretStr("redis://127.0.0.1:6379/0")}),
    (SqliteStoreSettings, {"path": "/tmp/durably-settings.db"}),
]


def _numeric_fields(model: type[BaseModel]) -> list[str]:
    return [
        name
        for name, field in model.model_fields.items()
        if field.annotation in (int, float)
        and any(getattr(meta, "gt", None) == 0 for meta in field.metadata)
    ]


CASES = [(model, base, name) for model, base in BASES for name in _numeric_fields(model)]


def test_every_backing_has_positive_number_settings() -> None:
    names = {(model.__name__, name) for model, _, name in CASES}
    for model, _ in BASES:
        assert "max_value_bytes" in {n for m, n in names if m == model.__name__}, names
    assert ("PostgresStoreSettings", "pool_timeout_seconds") in names


@pytest.mark.parametrize(("model", "base", "name"), CASES)
@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_is_refused(
    model: type[BaseModel], base: dict[str, Any], name: str, flag: bool
) -> None:
    with pytest.raises(ValidationError, match="not a bool"):
        model(**base, **{name: flag})


@pytest.mark.parametrize(("model", "base", "name"), CASES)
def test_a_number_and_its_text_are_taken(
    model: type[BaseModel], base: dict[str, Any], name: str
) -> None:
    assert getattr(model(**base, **{name: 7}), name) == 7
    assert getattr(model(**base, **{name: "7"}), name) == 7
    with pytest.raises(ValidationError):
        model(**base, **{name: 0})


def test_the_annotations_are_the_shared_ones() -> None:
    hints = typing.get_type_hints(SqliteStoreSettings, include_extras=True)
    assert "BeforeValidator" in repr(hints["page_cache_mib"])
