"""A SQLite file made before the claim check gains its table when opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably.sqlite import SCHEMA_VERSION, SqliteClaimCheckStore, connect


async def test_a_version_1_file_gains_the_claim_check_table_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    await (await connect(path)).close()
    with sqlite3.connect(path) as raw:  # back to the version-1 layout
        raw.execute("DROP TABLE durably_claim_check")
        raw.execute("UPDATE durably_schema_version SET version = 1")
    database = await connect(path)
    try:
        store = SqliteClaimCheckStore(database)
        assert await store.fetch(await store.put(b"kept")) == b"kept"
        version = await database.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version")[0], write=False
        )
        assert version == SCHEMA_VERSION
    finally:
        await database.close()
