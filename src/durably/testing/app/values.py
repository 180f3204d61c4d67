"""`AppValues`: bytes and sets keep their value through every kind of record, and records
written before bytes were kept as base64 and sets sorted still read."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from durably.app import App, Context, Topic
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fresh_id, write_earlier

EVERY_BYTE = bytes(range(256))
BLOB: Topic[bytes] = Topic("blob", bytes)
NAMES = frozenset({"ada", "grace", "edsger", "barbara", "donald", "alan", "leslie", "tony"})


def earlier_digest(arguments: dict[str, Any]) -> str:
    """A step record's argument digest as every release writes it: 64-bit BLAKE2b of the
    encoded arguments' canonical JSON (sorted keys, no spaces, text unescaped)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class AppValues(AppFixtures):
    """Values of every byte and sets in every process's order, on every backing."""

    async def test_every_byte_value_round_trips_through_every_kind_of_record(
        self, app: App
    ) -> None:
        ledger: list[bytes] = []
        digest = hashlib.sha256(EVERY_BYTE).digest()  # holds 0xe2 and other non-UTF-8

        @app.step
        async def sign(blob: bytes) -> bytes:
            ledger.append(blob)
            return hashlib.sha256(blob).digest()

        @app.workflow
        async def reverse(ctx: Context, blob: bytes) -> bytes:
            return blob[::-1]

        @app.workflow
        async def carry(ctx: Context, blob: bytes) -> list[bytes]:
            signed = await sign(blob)
            await ctx.set_event("signed", signed)
            sent = await ctx.recv(BLOB)
            reversed_ = await ctx.child(reverse, blob)
            assert sent is not None
            return [signed, sent, reversed_]

        handle = await carry.start(EVERY_BYTE)
        await app.run_until_idle()  # the step runs, then the body waits for a message
        assert await handle.get_event("signed", type=bytes) == digest
        await handle.send(BLOB, EVERY_BYTE[::-1] + b"\x00")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == [
            digest,
            EVERY_BYTE[::-1] + b"\x00",
            EVERY_BYTE[::-1],
        ]
        assert ledger == [EVERY_BYTE]  # replayed on the later passes, its argument matching

    async def test_a_step_result_that_is_not_utf8_is_recorded_not_lost(self, app: App) -> None:
        paid: list[int] = []

        @app.step
        async def render(pages: int) -> bytes:
            paid.append(pages)
            return b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n" + bytes(pages)

        @app.workflow
        async def report(ctx: Context) -> int:
            pdf = await render(3)
            await ctx.sleep(60)
            return len(pdf)

        handle = await report.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 17
        assert paid == [3]

    async def test_records_written_before_bytes_were_base64_still_read(self, app: App) -> None:
        ledger: list[bytes] = []
        step_name = f"echo-{fresh_id()}"

        @app.step(name=step_name)
        async def echo(blob: bytes) -> bytes:
            ledger.append(blob)
            return blob

        @app.workflow(name=f"earlier-{fresh_id()}")
        async def earlier(ctx: Context, blob: bytes) -> list[bytes]:
            echoed = await echo(blob)
            sent = await ctx.recv(BLOB)
            assert sent is not None
            return [blob, echoed, sent]

        # As the release before wrote them: bytes as UTF-8 text.
        workflow = await write_earlier(
            app,
            earlier.kind,
            {"blob": "pdf é"},
            {
                f"{step_name}#1": {"a": earlier_digest({"blob": "pdf é"}), "v": "echo é"},
                "durably:event:stage#1": "stage é",
            },
            [{"topic": BLOB.name, "value": "message é"}],
        )
        await app.run_until_idle()
        handle = await earlier.get_handle(workflow)
        assert await handle.result(timeout=5) == [
            "pdf é".encode(),
            "echo é".encode(),
            "message é".encode(),
        ]
        assert await handle.get_event("stage", type=bytes) == "stage é".encode()
        assert ledger == []  # its record answered: the digest of then still matches

    async def test_a_set_argument_fans_out_in_one_order_on_every_pass(self, app: App) -> None:
        order: list[str] = []

        @app.step
        async def greet(name: str) -> str:
            order.append(name)
            return f"hello {name}"

        @app.workflow
        async def greet_all(ctx: Context, names: frozenset[str], tags: set[str]) -> list[str]:
            greetings = [await greet(name) for name in names]
            await ctx.sleep(60)
            assert list(tags) == sorted(tags)
            return greetings

        handle = await greet_all.start(NAMES, set(NAMES))
        await app.run_until_idle()
        assert order == sorted(NAMES)  # the recorded order: sorted when written
        assert await handle.result(timeout=5) == [f"hello {name}" for name in sorted(NAMES)]
        assert (await handle.status()).status is WorkflowStatus.COMPLETED

    async def test_a_set_an_earlier_release_recorded_unsorted_keeps_its_order(
        self, app: App
    ) -> None:
        recorded = ["leslie", "ada", "tony"]  # the order that process's set iterated in

        @app.workflow(name=f"earlier-set-{fresh_id()}")
        async def listed(ctx: Context, names: set[str]) -> list[str]:
            return list(names)

        workflow = await write_earlier(app, listed.kind, {"names": recorded})
        await app.run_until_idle()
        assert await (await listed.get_handle(workflow)).result(timeout=5) == recorded


__all__ = ["AppValues", "earlier_digest"]
