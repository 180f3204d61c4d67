"""A real TCP proxy that can cut a server off for a while: for tests of riding out a
failover or restart without touching the shared server."""

from __future__ import annotations

import asyncio
import contextlib

from tests.reply_dropper import Proxy


class OutageProxy(Proxy):
    """Forwards connections to the server on ``port``. `cut` ends every forwarded
    connection and, for the given seconds, closes new ones as soon as they are accepted
    (the client sees the server go away, then refuse it, then come back)."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self._until = 0.0

    def cut(self, seconds: float) -> None:
        """End every connection now and refuse new ones for ``seconds``."""
        self._until = asyncio.get_running_loop().time() + seconds
        for task in self._serving:
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if asyncio.get_running_loop().time() < self._until:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._port)
        pumps = [
            asyncio.create_task(_pump(reader, up_writer)),
            asyncio.create_task(_pump(up_reader, writer)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            writer.close()
            up_writer.close()
            self._serving.discard(task)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()


__all__ = ["OutageProxy"]
