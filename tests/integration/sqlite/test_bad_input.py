"""Files durably cannot use are refused with a clear error naming the file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from durably.errors import ConfigurationError
from durably.sqlite import SCHEMA_VERSION, SqliteStoreSettings, connect


async def test_a_path_in_a_missing_directory_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "app.db"
    with pytest.raises(ConfigurationError, match=str(path)):
        await connect(path)


async def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=str(tmp_path)):
        await connect(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
async def test_a_read_only_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "read-only.db"
    await (await connect(path)).close()
    _set_modes(path, file=0o444, directory=0o555)
    try:
        with pytest.raises(ConfigurationError, match=str(path)):
            await connect(path)
    finally:
        _set_modes(path, file=0o644, directory=0o755)


def _set_modes(path: Path, *, file: int, directory: int) -> None:
    path.chmod(file)
    path.parent.chmod(directory)


async def test_a_file_that_is_not_a_sqlite_database_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not the pages you are looking for\n" * 200)
    with pytest.raises(ConfigurationError, match=str(path)):
        await connect(path)
    assert path.read_bytes().startswith(b"these are not"), "the file is left as it was"


async def test_a_newer_schema_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    await (await connect(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE durably_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    raw.close()
    with pytest.raises(ConfigurationError, match=rf"{path}.*version {SCHEMA_VERSION + 1}"):
        await connect(path)


async def test_opening_a_file_twice_migrates_it_once_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "twice.db"
    first = await connect(path)
    second = await connect(path)
    await first.close()
    await second.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT version FROM durably_schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.close()


def test_settings_read_the_path_from_the_environment() -> None:
    settings = SqliteStoreSettings.from_env({"DURABLY_SQLITE_PATH": "/var/lib/app.db"})
    assert settings.path == "/var/lib/app.db"
    with pytest.raises(ConfigurationError, match="DURABLY_SQLITE_PATH"):
        SqliteStoreSettings.from_env({})
