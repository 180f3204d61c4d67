"""How the App keeps its workflows in a store, for tools that read a store directly.

The CLI (and any operator tool) reads workflows through the stores, not through an App: it
needs the key a (tenant, id) pair is stored under, the tenant and id a stored key names, the
kind a workflow's start record names (or why it is not a start record an App writes), and
which records hold instants (to show them as times). Application code uses `durably.App`
instead.
"""

from durably.app._catalogue import catalogue_earlier
from durably.app._history import described
from durably.app._layout import START, START_INSTANTS, instant, read_start, recorded_kind
from durably.app._slots import delete_workflow
from durably.app._tenancy import (
    DEFAULT_TENANT,
    earlier_workflows,
    key_prefix,
    older_layout,
    scoped_key,
    settle_layout,
    workflow_at,
    workflow_scope,
)
from durably.app._unreadable import history_of, kind_of, problems, records_of, status_of

__all__ = [
    "DEFAULT_TENANT",
    "START",
    "START_INSTANTS",
    "catalogue_earlier",
    "delete_workflow",
    "described",
    "earlier_workflows",
    "history_of",
    "instant",
    "key_prefix",
    "kind_of",
    "older_layout",
    "problems",
    "read_start",
    "recorded_kind",
    "records_of",
    "scoped_key",
    "settle_layout",
    "status_of",
    "workflow_at",
    "workflow_scope",
]
