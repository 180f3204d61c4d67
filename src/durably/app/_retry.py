"""`Retry`: how often a step (or an opted-in workflow body) is tried, and how long to wait
between tries."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from durably.errors import InvalidInputError, NonRetryable


@dataclass(frozen=True, slots=True)
class Retry:
    """Try up to ``max_attempts`` times, waiting ``initial`` seconds after the first
    failure, growing by ``multiplier`` up to ``maximum``, each wait jittered by up to
    ``jitter`` of itself. An error that is an instance of a ``non_retryable`` type, or a
    `durably.NonRetryable`, stops at once.

    Raises `InvalidInputError` at construction for a field of the wrong type (a bool is
    not a number), a NaN or infinite number, ``initial`` above ``maximum``, a
    ``multiplier`` below 1, a ``jitter`` outside 0..1, or a ``non_retryable`` that is not
    a tuple of exception classes."""

    max_attempts: int = 3
    initial: float = 1.0
    maximum: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.25
    non_retryable: tuple[type[BaseException], ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidInputError(f"max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise InvalidInputError(f"max_attempts must be at least 1, got {self.max_attempts}")
        for name in ("initial", "maximum", "multiplier", "jitter"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise InvalidInputError(f"{name} must be a finite number, got {value!r}")
        if not 0 <= self.initial <= self.maximum:
            raise InvalidInputError("need 0 <= initial <= maximum")
        if self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise InvalidInputError("need multiplier >= 1 and 0 <= jitter <= 1")
        # Checked here, not at the first failure: `retries` hands these to isinstance.
        if not isinstance(self.non_retryable, tuple) or not all(
            isinstance(kind, type) and issubclass(kind, BaseException)
            for kind in self.non_retryable
        ):
            raise InvalidInputError(
                "non_retryable must be a tuple of exception classes, such as (ValueError,); "
                f"got {self.non_retryable!r:.120}"
            )

    def retries(self, exc: BaseException, attempt: int) -> bool:
        """Whether to try again after ``exc`` ended attempt number ``attempt`` (from 1)."""
        if attempt >= self.max_attempts or isinstance(exc, NonRetryable):
            return False
        return not isinstance(exc, self.non_retryable)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1), jittered."""
        try:
            grown = self.initial * float(self.multiplier) ** (attempt - 1)
        except OverflowError:  # after a long run of attempts: past any maximum (unless 0)
            grown = math.inf if self.initial > 0 else 0.0
        base = min(self.maximum, grown)
        return base * (1 - self.jitter * random.random())


ONCE = Retry(max_attempts=1)
"""The default: one attempt (a step retries only when given ``retry=``)."""

__all__ = ["ONCE", "Retry"]
