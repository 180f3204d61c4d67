"""Files durably cannot use are refused with a clear error naming the file."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
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


def test_a_read_only_file_is_refused_naming_it() -> None:
    # Root writes through file permissions, so the refusal is checked in a forked child
    # that drops to an unprivileged user first (`nobody` when the suite runs as root).
    directory = Path(tempfile.mkdtemp(prefix="durably-ro-"))
    path = directory / "read-only.db"
    try:
        asyncio.run(_create(path))
        path.chmod(0o444)
        directory.chmod(0o555)
        code, message = _connect_unprivileged(path)
        assert code == 3, message
        assert str(path) in message
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


async def _create(path: Path) -> None:
    await (await connect(path)).close()


def _connect_unprivileged(path: Path) -> tuple[int, str]:
    """Fork; the child drops privileges, tries to connect, and reports through a pipe."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        code, message = 4, "connected to a read-only file"
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            asyncio.run(_create(path))
        except ConfigurationError as exc:
            code, message = 3, str(exc)
        except BaseException as exc:
            code, message = 5, repr(exc)
        os.write(write_end, message.encode())
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status), message


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
