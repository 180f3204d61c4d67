"""durably.postgres: every protocol over PostgreSQL (psycopg 3 async pool, or asyncpg).

Nothing here applies schema on its own: call `migrate` (or run `EXPECTED_SCHEMA` with your
own migration tool), then build stores with ``open()`` (which runs `verify`).
"""

from durably.postgres.checkpointer import PostgresCheckpointer, PostgresEffect
from durably.postgres.claimcheck import PostgresClaimCheckStore
from durably.postgres.durable import PostgresDurable
from durably.postgres.executor import Executor
from durably.postgres.migrate import migrate, verify
from durably.postgres.queue import PostgresWorkQueue
from durably.postgres.scheduler import PostgresScheduler
from durably.postgres.schema import EXPECTED_SCHEMA, SCHEMA_VERSION, StateTables
from durably.postgres.settings import PostgresStoreSettings, open_pool
from durably.postgres.state import PostgresStateStore

__all__ = [
    "EXPECTED_SCHEMA",
    "SCHEMA_VERSION",
    "Executor",
    "PostgresCheckpointer",
    "PostgresClaimCheckStore",
    "PostgresDurable",
    "PostgresEffect",
    "PostgresScheduler",
    "PostgresStateStore",
    "PostgresStoreSettings",
    "PostgresWorkQueue",
    "StateTables",
    "migrate",
    "open_pool",
    "verify",
]
