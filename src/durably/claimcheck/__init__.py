"""durably.claimcheck: large values kept outside the workflow's records and the queue's items.

A value larger than a `ClaimCheckPolicy` allows is stored in a `ClaimCheckStore` and a small
handle is kept in its place; the `ClaimChecked*` wrappers do this around any checkpointer,
`Durable` or work queue. Every backing has a claim-check store, and `FileClaimCheckStore`
keeps the values as files in a directory.
"""

from durably.claimcheck.files import FileClaimCheckStore
from durably.claimcheck.policy import ClaimCheckPolicy
from durably.claimcheck.store import ClaimCheckStore
from durably.claimcheck.wrappers import (
    ClaimCheckedCheckpointer,
    ClaimCheckedDurable,
    ClaimCheckedQueue,
)

__all__ = [
    "ClaimCheckPolicy",
    "ClaimCheckStore",
    "ClaimCheckedCheckpointer",
    "ClaimCheckedDurable",
    "ClaimCheckedQueue",
    "FileClaimCheckStore",
]
