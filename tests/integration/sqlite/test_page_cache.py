"""The connection's page cache is the settings' size: 64 MiB unless set, never SQLite's
2 MiB, so a large catalog's indexes stay in memory between writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from durably.sqlite import SqliteStoreSettings, connect


async def _cache_kib(path: Path, settings: SqliteStoreSettings | None = None) -> int:
    db = await connect(path, settings=settings)
    try:
        size = await db.transaction(
            lambda tx: tx.execute("PRAGMA cache_size").fetchone()[0], write=False
        )
    finally:
        await db.close()
    return -int(size)  # a negative cache_size is in KiB


async def test_the_page_cache_is_the_settings_size_64_mib_by_default(tmp_path: Path) -> None:
    assert await _cache_kib(tmp_path / "default.db") == 64 * 1024
    small = SqliteStoreSettings(path=str(tmp_path / "small.db"), page_cache_mib=3)
    assert await _cache_kib(tmp_path / "small.db", small) == 3 * 1024


def test_a_page_cache_of_nothing_is_refused() -> None:
    with pytest.raises(ValidationError, match="page_cache_mib"):
        SqliteStoreSettings(path="app.db", page_cache_mib=0)
