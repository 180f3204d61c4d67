"""`Begins`: when a started workflow's body may begin (``start(delay=)`` or ``start(at=)``).

A delayed workflow is stored at once (its id taken, its handle valid); its first pass
sleeps durably until the time its start record names, holding no worker, then runs the
body. Checked before any I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durably.app._values import Duration, seconds_of
from durably.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class Begins:
    """A start's ``delay`` (seconds or a timedelta from now) or ``at`` (an aware datetime)."""

    delay: Duration | None = None
    at: datetime | None = None

    def not_before(self, now: float) -> float | None:
        """The App-clock time the body may begin at, None for at once.

        Raises:
            InvalidInputError: Both given, a negative or non-finite ``delay``, or an ``at``
                that is not a timezone-aware datetime; each named.
        """
        if self.delay is not None and self.at is not None:
            raise InvalidInputError("give start() either delay= or at=, not both")
        if self.delay is not None:
            seconds = seconds_of(self.delay, "delay", zero=True)
            return None if seconds == 0 else now + seconds
        if self.at is None:
            return None
        if not isinstance(self.at, datetime):
            raise InvalidInputError(f"at must be a datetime, got {type(self.at).__name__}")
        if self.at.utcoffset() is None:
            raise InvalidInputError(
                f"at must be a timezone-aware datetime, got naive {self.at.isoformat()}"
            )
        return self.at.timestamp()


AT_ONCE = Begins()

__all__ = ["AT_ONCE", "Begins"]
