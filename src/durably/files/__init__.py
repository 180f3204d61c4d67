"""durably.files: the claim check over a directory of files (no database needed)."""

from durably.files.claims import FileClaimCheckStore

__all__ = ["FileClaimCheckStore"]
