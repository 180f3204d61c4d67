"""`FileClaimCheckStore`: claim-check blobs as files under one directory.

Each blob is one file named by its digest: eight bytes of expiry time (a big-endian
double, infinity for none) then the data. A file is written whole under a temporary name
and renamed into place, so a reader sees an old blob or a new one, never part of one. The
directory and the files are the owner's alone (0700 and 0600).
"""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from durably.claimcheck.store import claim_digest, deposit, redeemed
from durably.clock import Clock, SystemClock
from durably.errors import ConfigurationError, StatePersistenceError

T = TypeVar("T")

_EXPIRY = struct.Struct(">d")


class FileClaimCheckStore:
    """A `ClaimCheckStore` over the files of ``directory`` (created 0700 if missing);
    expiry read from ``clock``. Several processes may share the directory."""

    def __init__(self, directory: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        self._root = Path(directory)
        self._clock: Clock = clock if clock is not None else SystemClock()
        if self._root.exists() and not self._root.is_dir():
            raise ConfigurationError(f"claim check directory {self._root} is not a directory")

    @property
    def directory(self) -> Path:
        """Where the blobs are kept."""
        return self._root

    async def put(self, data: bytes | str, *, ttl: float | None = None) -> str:
        """Keep ``data`` under its handle for ``ttl`` seconds (None: until forgotten)."""
        checked = deposit(data, ttl, self._clock.now())
        await self._io(self._put, checked.digest, checked.data, checked.expires_at)
        return checked.handle

    async def fetch(self, handle: str) -> bytes:
        """The data behind ``handle``; `ClaimUnavailableError` if missing or expired."""
        found = await self._io(self._read, claim_digest(handle))
        return redeemed(handle, found, self._clock.now())

    async def forget(self, handle: str) -> bool:
        """Drop the blob behind ``handle``; whether there was one."""
        return await self._io(self._forget, claim_digest(handle))

    async def purge(self) -> int:
        """Drop every expired blob; how many."""
        return await self._io(self._purge, self._clock.now())

    async def close(self) -> None:
        """Nothing to release (idempotent)."""

    async def held(self) -> int:
        """How many blobs are kept, expired ones not yet purged included."""
        return len(await self._io(self._files))

    # --- on a worker thread -----------------------------------------------------------------

    async def _io(self, function: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.to_thread(function, *args)
        except OSError as error:
            detail = f"{type(error).__name__} on {self._root}: {error.strerror}"
            raise StatePersistenceError("files", "unavailable", detail) from None

    def _path(self, digest: str) -> Path:
        return self._root / digest

    def _put(self, digest: str, data: bytes, expires_at: float) -> None:
        held = self._read(digest)
        if held is not None and held[1] >= expires_at:
            return  # the same bytes, kept at least as long already
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self._root, prefix=".put-")  # mode 0600
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(_EXPIRY.pack(expires_at))
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self._path(digest))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _sync_directory(self._root)

    def _read(self, digest: str) -> tuple[bytes, float] | None:
        try:
            raw = self._path(digest).read_bytes()
        except FileNotFoundError:
            return None
        (expires_at,) = _EXPIRY.unpack_from(raw)
        return raw[_EXPIRY.size :], expires_at

    def _forget(self, digest: str) -> bool:
        try:
            self._path(digest).unlink()
        except FileNotFoundError:
            return False
        return True

    def _purge(self, now: float) -> int:
        dropped = 0
        for path in self._files():
            try:
                with path.open("rb") as file:
                    (expires_at,) = _EXPIRY.unpack(file.read(_EXPIRY.size))
            except (FileNotFoundError, struct.error):
                continue
            if expires_at <= now and self._forget(path.name):
                dropped += 1
        return dropped

    def _files(self) -> list[Path]:
        if not self._root.is_dir():
            return []
        return [path for path in self._root.iterdir() if not path.name.startswith(".")]


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


__all__ = ["FileClaimCheckStore"]
