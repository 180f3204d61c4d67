"""durably.sqlite: every store over one embedded SQLite file (stdlib `sqlite3`, WAL).

db = await connect("app.db")
state, queue = SqliteStateStore(db), SqliteWorkQueue(db)
await db.transaction(lambda tx: (state.bound(tx).put_run(run), queue.bound(tx).enqueue(item)))
"""

from durably.sqlite.checkpointer import BoundSqliteCheckpointer, SqliteCheckpointer, SqliteEffect
from durably.sqlite.claimcheck import SqliteClaimCheckStore
from durably.sqlite.connection import (
    SCHEMA_VERSION,
    Database,
    DatabaseClosedError,
    Transaction,
    TransactionEndedError,
    connect,
)
from durably.sqlite.durable import SqliteDurable
from durably.sqlite.queue import BoundSqliteWorkQueue, SqliteWorkQueue
from durably.sqlite.scheduler import BoundSqliteScheduler, SqliteScheduler
from durably.sqlite.settings import SqliteStoreSettings
from durably.sqlite.state import BoundSqliteStateStore, SqliteStateStore

__all__ = [
    "SCHEMA_VERSION",
    "BoundSqliteCheckpointer",
    "BoundSqliteScheduler",
    "BoundSqliteStateStore",
    "BoundSqliteWorkQueue",
    "Database",
    "DatabaseClosedError",
    "SqliteCheckpointer",
    "SqliteClaimCheckStore",
    "SqliteDurable",
    "SqliteEffect",
    "SqliteScheduler",
    "SqliteStateStore",
    "SqliteStoreSettings",
    "SqliteWorkQueue",
    "Transaction",
    "TransactionEndedError",
    "connect",
]
