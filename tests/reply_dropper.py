"""A real TCP proxy that loses one answer: for tests of a write whose reply never arrives
although the server applied it (the connection dropped in between)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class Proxy:
    """A TCP proxy on a free loopback port toward the server on ``port``; subclasses
    forward each connection's requests in ``_forward`` (or serve it whole in ``_serve``),
    tracked in ``_serving`` so `stop` ends them."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._listener: asyncio.Server | None = None
        self._serving: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._listener = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._listener.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and end every connection still open (within the test's loop)."""
        if self._listener is not None:
            self._listener.close()
        for task in self._serving:
            task.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Connect upstream, pump the server's replies back to the client, and let
        `_forward` carry the client's requests up; tracked in ``_serving`` until done."""
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._port)
        back = asyncio.create_task(self._pump(up_reader, writer))
        try:
            await self._forward(reader, up_reader, up_writer, back)
        finally:
            back.cancel()
            await asyncio.gather(back, return_exceptions=True)
            writer.close()
            up_writer.close()
            self._serving.discard(task)

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        back: asyncio.Task[None],
    ) -> None:
        """Carry one client's requests (``reader``) to the server (``up_writer``) until
        either side ends; ``back`` is the task pumping the server's replies to the client."""
        raise NotImplementedError

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Forward ``source`` to ``sink`` until ``source`` ends, then close ``sink``."""
        try:
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()
        except asyncio.CancelledError:
            raise  # cut short by `_serve` (an answer dropped): it closes the sink itself
        except OSError:
            pass
        sink.close()  # the server hung up: so does the proxy, toward the client


class ReplyDropper(Proxy):
    """Forwards connections to the server on ``port``; the first request carrying ``marker``
    reaches the server, its reply is read and thrown away, and the client's connection is
    closed: the write is applied, and its answer lost with the connection. ``meanwhile``,
    when given, runs after the write was applied and before the client learns of the loss
    (what other clients do in that window: a worker completing the item, say)."""

    def __init__(
        self,
        port: int,
        marker: bytes,
        meanwhile: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(port)
        self._marker = marker
        self.meanwhile = meanwhile
        self.dropped = 0

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        back: asyncio.Task[None],
    ) -> None:
        while chunk := await reader.read(65536):
            up_writer.write(chunk)
            await up_writer.drain()
            if self.dropped == 0 and self._marker in chunk:
                self.dropped += 1
                back.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await back
                await up_reader.read(65536)  # the server's reply: applied, never delivered
                if self.meanwhile is not None:
                    await self.meanwhile()
                break


__all__ = ["Proxy", "ReplyDropper"]
