"""`ClaimCheckPolicy`: when a value travels as a claim-check handle, and how it comes back.

A checkpointed value whose encoding is over ``threshold`` bytes is put in the policy's
`ClaimCheckStore` and recorded as a small envelope: the handle, the first ``head``
characters of the encoding (what a listing shows) and its size. A work item's payload
field over the threshold is put in the store and keeps only its head, with a manifest of
handles under the reserved field `PAYLOAD_MANIFEST`. Reading either back fetches the
blobs. The envelope is deterministic (the handle is the content's hash), so two passes
recording an equal value still write equal encodings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from durably.claimcheck.store import ClaimCheckStore, is_handle
from durably.errors import InvalidInputError
from durably.stores.codec import CheckpointCodec, screened_encode
from durably.validation import non_negative_int, positive, positive_int

if TYPE_CHECKING:
    from durably.stores.work import WorkItem

VALUE_MARK = "durably:claim"
"""The key that makes a checkpointed dict an envelope (a user's dict holding it is escaped)."""

PAYLOAD_MANIFEST = "durably:claims"
"""The payload field naming the handles of a claim-checked item's fields (reserved)."""


@dataclass(frozen=True, slots=True)
class Stowed:
    """A value as it is recorded, and its encoding when it went to the store."""

    stored: object
    text: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimCheckPolicy:
    """Which values go behind a claim check: those over ``threshold`` bytes (encoded),
    kept in ``store`` for ``ttl`` seconds of the store's clock (None: until forgotten),
    leaving their first ``head`` characters in place for display.

    `InvalidInputError` for a threshold below 1, a negative head or a bad ttl.
    """

    store: ClaimCheckStore
    threshold: int = 64 * 1024
    head: int = 200
    ttl: float | None = None

    def __post_init__(self) -> None:
        positive_int(self.threshold, "threshold")
        non_negative_int(self.head, "head")
        if self.ttl is not None:
            positive(self.ttl, "ttl")

    def _over(self, text: str) -> bool:
        # A character is at most 4 bytes: only a long text is encoded to be counted.
        return len(text) * 4 > self.threshold and len(text.encode()) > self.threshold

    # --- checkpointed values -------------------------------------------------------------

    async def stow(self, value: object, codec: CheckpointCodec) -> Stowed:
        """``value`` as it should be recorded: an envelope when its encoding is over the
        threshold (the blob put first), an escaped copy when it is a dict that would read
        as an envelope, else itself. Refuses what ``codec`` refuses, before any I/O."""
        text = screened_encode(codec)(value)
        if self._over(text):
            handle = await self.store.put(text, ttl=self.ttl)
            envelope = {VALUE_MARK: handle, "head": text[: self.head], "bytes": len(text.encode())}
            return Stowed(envelope, text)
        if isinstance(value, dict) and VALUE_MARK in value:
            return Stowed({VALUE_MARK: None, "value": value})
        return Stowed(value)

    async def unstow(
        self, stored: object, codec: CheckpointCodec, mine: Stowed | None = None
    ) -> object:
        """The value ``stored`` stands for: fetched and decoded for an envelope (decoded
        from ``mine`` without I/O when it is this caller's own), unescaped for an escaped
        dict, else itself. `ClaimUnavailableError` when the blob is gone."""
        if not isinstance(stored, dict) or VALUE_MARK not in stored:
            return stored
        handle = stored[VALUE_MARK]
        if handle is None:
            return stored.get("value")
        if mine is not None and mine.text is not None and mine.stored == stored:
            return codec.decode(mine.text)
        if not is_handle(handle):
            return stored  # not one of ours: a value recorded without the policy
        return codec.decode((await self.store.fetch(handle)).decode())

    # --- work payloads -------------------------------------------------------------------

    async def stow_payload(self, payload: dict[str, str]) -> dict[str, str]:
        """``payload`` with every field over the threshold put in the store: the field
        keeps its head and `PAYLOAD_MANIFEST` names its handle. `InvalidInputError` for a
        payload already holding the manifest field."""
        if PAYLOAD_MANIFEST in payload:
            raise InvalidInputError(f"payload field {PAYLOAD_MANIFEST!r} is reserved")
        manifest: dict[str, str] = {}
        stowed = dict(payload)
        for field, text in payload.items():
            if isinstance(text, str) and self._over(text):
                manifest[field] = await self.store.put(text, ttl=self.ttl)
                stowed[field] = text[: self.head]
        if manifest:
            stowed[PAYLOAD_MANIFEST] = json.dumps(manifest, sort_keys=True)
        return stowed

    async def unstow_payload(self, payload: dict[str, str]) -> dict[str, str]:
        """``payload`` with every claim-checked field fetched back and the manifest
        dropped (itself when it has none). `ClaimUnavailableError` when a blob is gone."""
        manifest = payload.get(PAYLOAD_MANIFEST)
        if manifest is None:
            return payload
        restored = {field: text for field, text in payload.items() if field != PAYLOAD_MANIFEST}
        for field, handle in json.loads(manifest).items():
            restored[field] = (await self.store.fetch(handle)).decode()
        return restored

    async def expand(self, item: WorkItem) -> WorkItem:
        """``item`` with its payload fetched back in full (`unstow_payload`)."""
        payload = await self.unstow_payload(item.payload)
        return item if payload is item.payload else item.model_copy(update={"payload": payload})


__all__ = ["PAYLOAD_MANIFEST", "VALUE_MARK", "ClaimCheckPolicy", "Stowed"]
