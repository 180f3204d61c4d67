"""Where durably's PostgreSQL tables live (`StateTables`) and their published shape
(`EXPECTED_SCHEMA`)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields

from durably.errors import ConfigurationError
from durably.postgres import statements

SCHEMA_VERSION = 7
"""The schema version this release reads and writes; `verify` refuses any other."""

# Lower-case, unquoted-safe names only: a table name is interpolated (a placeholder cannot
# name a relation), so anything else is refused rather than escaped.
_PLAIN = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # whole string: fullmatch, as "$" passes a final "\n"


@dataclass(frozen=True, slots=True)
class StateTables:
    """The names of durably's tables, optionally inside a PostgreSQL schema.

    Every name must be a plain identifier (lower-case letters, digits, underscores, at most
    63 characters); anything else raises `ConfigurationError`.
    """

    schema: str | None = None
    schema_version: str = "durably_schema_version"
    runs: str = "durably_runs"
    run_totals: str = "durably_run_totals"
    run_seq: str = "durably_run_seq"
    sessions: str = "durably_sessions"
    work: str = "durably_work"
    turns: str = "durably_queue_turns"
    turn_seq: str = "durably_turn_seq"
    rota: str = "durably_queue_rota"
    waiting: str = "durably_queue_waiting"
    counters: str = "durably_queue_counters"
    enqueues: str = "durably_enqueue_tokens"
    dedupe_keys: str = "durably_dedupe_keys"
    schedule_ticks: str = "durably_schedule_ticks"
    debounces: str = "durably_debounces"
    gates: str = "durably_queue_gates"
    throttles: str = "durably_queue_throttles"
    workflow_checkpoint: str = "durably_workflow_checkpoint"
    workflow_claim: str = "durably_workflow_claim"
    workflow_queue: str = "durably_workflow_queue"
    workflow_status: str = "durably_workflow_status"
    workflow_seq: str = "durably_workflow_seq"
    workflow_tenants: str = "durably_workflow_tenants"
    workflow_turn_seq: str = "durably_workflow_turn_seq"
    workflow_admitted: str = "durably_workflow_admitted"
    workflow_catalog: str = "durably_workflow_catalog"
    workflow_tenant_counts: str = "durably_workflow_tenant_counts"
    workflow_counts: str = "durably_workflow_counts"
    workflow_gated: str = "durably_workflow_gated"
    workflow_gates: str = "durably_workflow_gates"
    workflow_gate_turns: str = "durably_workflow_gate_turns"
    workflow_throttles: str = "durably_workflow_throttles"
    throughput: str = "durably_throughput"
    claim_check: str = "durably_claim_check"

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name == "schema":
                continue
            if not isinstance(value, str) or not _PLAIN.fullmatch(value):
                raise ConfigurationError(
                    f"StateTables.{field.name} must be a plain lower-case identifier "
                    f"(letters, digits, underscores; at most 63), got {value!r}"
                )
            # Index names are derived from table names with a suffix of up to 15 characters.
            if len(value) > 48 and field.name != "schema":
                raise ConfigurationError(
                    f"StateTables.{field.name} must be at most 48 characters, got {value!r}"
                )

    def qualified(self, name: str) -> str:
        """``name`` quoted and, when a schema is set, schema-qualified."""
        if self.schema is None:
            return f'"{name}"'
        return f'"{self.schema}"."{name}"'

    @property
    def names(self) -> dict[str, str]:
        """Placeholder values for the ``.sql`` templates: ``{field}`` is the qualified name,
        ``{field_name}`` the bare one (for index names), ``{field_text}`` a SQL string of
        the qualified name (for ``nextval``)."""
        names: dict[str, str] = {}
        if self.schema is not None:
            names["schema"] = f'"{self.schema}"'
        for field in fields(self):
            if field.name == "schema":
                continue
            bare = getattr(self, field.name)
            qualified = self.qualified(bare)
            names[field.name] = qualified
            names[f"{field.name}_name"] = bare
            names[f"{field.name}_text"] = qualified
        # The catalog's trigger functions, named after its table (in its schema).
        names["workflow_catalog_count"] = self.qualified(f"{self.workflow_catalog}_count")
        names["workflow_catalog_follow"] = self.qualified(f"{self.workflow_catalog}_follow")
        names["throughput_count"] = self.qualified(f"{self.throughput}_count")
        names["run_totals_count"] = self.qualified(f"{self.run_totals}_count")
        return names

    def channel(self, kind: str) -> str:
        """The LISTEN/NOTIFY channel for ``kind`` ("work", "workflow", or "changes" for the
        checkpointer's announcements) of these tables: short and unique per table set, so
        two schemas never wake each other."""
        tables = {"work": self.work, "changes": self.workflow_status}
        table = tables.get(kind, self.workflow_queue)
        digest = hashlib.sha1(self.qualified(table).encode()).hexdigest()[:16]
        return f"durably_{kind}_{digest}"


_SCHEMA_TEMPLATES = statements.load("schema.sql", keep_comments=True)  # published text


def schema_statements(tables: StateTables) -> list[str]:
    """The schema DDL for ``tables``, one statement per element."""
    text = statements.render(_SCHEMA_TEMPLATES["schema"], tables.names)
    return [part.rstrip(";").strip() for part in split_statements(text) if part.rstrip(";").strip()]


def split_statements(script: str) -> list[str]:
    """``script``'s statements: each ends with a line ending in ``;`` outside a ``$$``
    body (a function's body holds statements of its own)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for line in script.splitlines(keepends=True):
        current.append(line)
        if line.count("$$") % 2:
            quoted = not quoted
        if not quoted and line.rstrip().endswith(";"):
            parts.append("".join(current).strip())
            current = []
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def schema_queries(tables: StateTables) -> dict[str, str]:
    """The schema-inspection statements (`verify`, `migrate`) rendered for ``tables``."""
    skip = {"schema"} if tables.schema is not None else {"schema", "create_schema"}
    return statements.render_all(
        {key: value for key, value in _SCHEMA_TEMPLATES.items() if key not in skip},
        tables.names,
    )


EXPECTED_SCHEMA: str = statements.render(_SCHEMA_TEMPLATES["schema"], StateTables().names)
"""The schema this release expects, with the default table names; a team's own migration
tool may apply it instead of `migrate`."""

__all__ = [
    "EXPECTED_SCHEMA",
    "SCHEMA_VERSION",
    "StateTables",
    "schema_queries",
    "split_statements",
]
