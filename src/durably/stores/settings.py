"""Settings shared by the datastore backings (pydantic models at the boundary).

Adapters never read the environment themselves; `from_env` is the one place that does.
"""

from __future__ import annotations

import os
import random
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from durably.errors import ConfigurationError
from durably.stores.backoff import FAILOVER_SECONDS, PAUSE_CAP_SECONDS, Jitter

DEFAULT_MAX_VALUE_BYTES = 1024 * 1024
"""The size limit of one stored value unless a backing's settings say otherwise."""


def _not_a_bool(value: object) -> object:
    """Refuse ``True``/``False`` where a number is meant (pydantic takes them as 1 and 0)."""
    if isinstance(value, bool):
        raise ValueError("a number is needed, not a bool")
    return value


PositiveInt = Annotated[int, BeforeValidator(_not_a_bool), Field(gt=0)]
"""A count setting: a whole number above zero (a bool is refused)."""
PositiveFloat = Annotated[float, BeforeValidator(_not_a_bool), Field(gt=0)]
"""A duration or rate setting: a number above zero (a bool is refused)."""


class StoreSettings(BaseModel):
    """Retry budget, pool and size limits common to every datastore backing."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    env_var: ClassVar[str] = ""

    max_attempts: PositiveInt = Field(3, description="tries per call, the first included")
    backoff_seconds: PositiveFloat = Field(0.05, description="first retry delay; doubles")
    pool_size: PositiveInt = 10
    connect_timeout_seconds: PositiveFloat = 5.0
    max_value_bytes: PositiveInt = DEFAULT_MAX_VALUE_BYTES
    jitter: Jitter = Field(
        default=random.random,
        exclude=True,
        repr=False,
        description="source of retry jitter, a float in [0, 1) per call (fix it in tests)",
    )

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Self:
        """Build settings with the DSN (or path) read from ``cls.env_var``."""
        env = os.environ if environ is None else environ
        value = env.get(cls.env_var)
        if not value:
            raise ConfigurationError(f"environment variable {cls.env_var} is not set")
        field = "path" if "path" in cls.model_fields else "dsn"
        return cls(**{field: SecretStr(value) if field == "dsn" else value, **overrides})


class ServerStoreSettings(StoreSettings):
    """The settings of a backing on a server that can fail over (PostgreSQL, Redis): a call
    keeps trying a transient failure for ``retry_budget_seconds`` (from its first failure),
    with doubling, jittered pauses of at most ``backoff_cap_seconds`` each, or until
    ``max_attempts`` tries, whichever ends first."""

    max_attempts: PositiveInt = Field(100, description="tries per call at most")
    retry_budget_seconds: PositiveFloat = Field(
        FAILOVER_SECONDS, description="how long a call keeps trying after its first failure"
    )
    backoff_cap_seconds: PositiveFloat = Field(
        PAUSE_CAP_SECONDS, description="the longest single pause between two tries"
    )


__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "PositiveFloat",
    "PositiveInt",
    "ServerStoreSettings",
    "StoreSettings",
]
