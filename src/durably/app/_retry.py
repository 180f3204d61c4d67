"""`Retry`: how often a step (or an opted-in workflow body) is tried, and the waits between."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from durably.errors import InvalidInputError, NonRetryable


@dataclass(frozen=True, slots=True)
class Retry:
    """How often a step is tried, and how long it waits between tries.

    The wait after failed attempt ``n`` is ``initial * multiplier ** (n - 1)`` seconds, at
    most ``maximum``, less a random part of up to ``jitter`` of itself. An error that is an
    instance of a ``non_retryable`` type, or a `durably.NonRetryable`, stops at once. A
    workflow body's retries (``retry=`` on `App.workflow`) use ``max_attempts``, ``initial``
    and ``maximum`` only: their waits double, without jitter, whatever the body raised.

    Args:
        max_attempts: The most attempts, the first included (1: no retries).
        initial: Seconds to wait after the first failure.
        maximum: The longest wait, in seconds.
        multiplier: How much each wait grows over the one before (at least 1).
        jitter: The largest part of a wait (0 to 1) taken off at random, so that failures
            at the same moment are not retried at the same moment.
        non_retryable: Exception classes that stop the retries at once.

    Raises:
        InvalidInputError: A field of the wrong type (a bool is not a number), a NaN or
            infinite number, a ``max_attempts`` below 1, an ``initial`` below 0 or above
            ``maximum``, a ``multiplier`` below 1, a ``jitter`` outside 0..1, or a
            ``non_retryable`` that is not a tuple of exception classes.
    """

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
        """Whether to try again after an error ended an attempt.

        Args:
            exc: The error that ended the attempt.
            attempt: The attempt's number, from 1.
        """
        if attempt >= self.max_attempts or isinstance(exc, NonRetryable):
            return False
        return not isinstance(exc, self.non_retryable)

    def backoff(self, attempt: int) -> float:
        """Return the seconds to wait after a failed attempt, jittered.

        Args:
            attempt: The failed attempt's number, from 1.
        """
        try:
            grown = self.initial * float(self.multiplier) ** (attempt - 1)
        except OverflowError:  # after a long run of attempts: past any maximum (unless 0)
            grown = math.inf if self.initial > 0 else 0.0
        base = min(self.maximum, grown)
        return base * (1 - self.jitter * random.random())


ONCE = Retry(max_attempts=1)
"""The default: one attempt (a step retries only when given ``retry=``)."""

__all__ = ["ONCE", "Retry"]
