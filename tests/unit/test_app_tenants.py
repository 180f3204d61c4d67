"""Tenant scopes seen from one App: its ``tenant=`` default, the key a (tenant, id) pair
maps to, refusals before any I/O, and what a start costs on a store that holds no
workflows of the layout before tenant scopes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durably
from durably.app._tenancy import MARKER, looked_up, scope, workflow_key
from durably.clock import ManualClock
from durably.errors import InvalidInputError, WorkflowNotFoundError
from durably.validation import MAX_ID_BYTES

# Text every backing keeps (no NUL, no lone surrogate), colons and digits likely.
_TEXT = st.text(
    alphabet=st.one_of(st.sampled_from(":0123456789/#~dt"), st.characters(codec="utf-8")),
    min_size=1,
    max_size=12,
).filter(lambda text: "\x00" not in text)


_TENANT = st.one_of(st.just("default"), _TEXT)
# Ids a user may give: none starts with the prefix of the keys the App makes.
_ID = st.one_of(_TEXT, st.sampled_from(["durably", "durably;x", "t4:acme:x"])).filter(
    lambda text: not text.startswith("durably:")
)


@given(_TENANT, _ID, _TENANT, _ID)
def test_two_different_tenant_and_id_pairs_never_share_a_key(
    tenant: str, id: str, other_tenant: str, other_id: str
) -> None:
    key = workflow_key(tenant, id)
    assert scope(key, {"tenant": tenant}) == (tenant, id)
    if (tenant, id) != (other_tenant, other_id):
        assert key != workflow_key(other_tenant, other_id)


def test_the_default_tenant_keeps_bare_ids_and_others_are_prefixed() -> None:
    assert workflow_key("default", "inv-1") == "inv-1"
    with pytest.raises(InvalidInputError, match="reserved"):
        looked_up("durably:t4:acme:inv-1")  # would be acme's key in the default tenant
    assert workflow_key("acme", "inv-1") == "durably:t4:acme:inv-1"
    assert scope("inv-1", {"tenant": "globex"}) == ("globex", "inv-1")  # an earlier layout
    assert scope("inv-1", None) == ("default", "inv-1")


def test_a_pair_that_does_not_fit_in_a_key_is_refused_and_one_that_fits_is_not() -> None:
    key = workflow_key("acme", "x" * (MAX_ID_BYTES - len("durably:t4:acme:")))
    assert len(key) == MAX_ID_BYTES
    with pytest.raises(InvalidInputError, match="at most 496 bytes"):
        workflow_key("acme", "x" * (MAX_ID_BYTES - len("durably:t4:acme:") + 1))


async def test_the_apps_tenant_is_where_it_starts_and_looks() -> None:
    app = durably.App("memory://", clock=ManualClock(), tenant="globex")

    @app.workflow(name="whose")
    async def whose(ctx: durably.Context) -> str:
        return ctx.tenant

    acme = await whose.start(id="inv-1001", tenant="acme")
    with pytest.raises(WorkflowNotFoundError, match="'globex'"):
        await app.get_handle("inv-1001")
    own = await whose.start(id="inv-1001")
    assert (own.created, own.tenant) == (True, "globex")
    await app.run_until_idle()
    assert await own.result(timeout=5) == "globex"
    assert await acme.result(timeout=5) == "acme"
    assert (await app.get_handle("inv-1001")).tenant == "globex"
    await app.close()


@pytest.mark.parametrize(
    ("id", "tenant"),
    [
        ("p/child:kind#1", None),
        ("p/start:kind#2", "acme"),
        ("durably:t4:acme:x", None),
        (MARKER, None),
        ("x" * 500, "acme"),
        ("ok", "bad\x00tenant"),
        ("ok", ""),
    ],
)
async def test_a_bad_id_or_tenant_is_refused_before_any_io(id: str, tenant: str | None) -> None:
    app = durably.App("redis://127.0.0.1:1/0")  # nothing listens: any I/O would fail else

    @app.workflow(name="anything")
    async def anything(ctx: durably.Context) -> None:
        return None

    with pytest.raises(InvalidInputError):
        await anything.start(id=id, tenant=tenant)
    if not id.startswith("p/"):  # a derived id may be looked up: only starting it is refused
        with pytest.raises(InvalidInputError):
            await app.get_handle(id, tenant=tenant)


class _CountedLoads:
    """Counts the checkpointer's loads of one App's stores."""

    def __init__(self, stores: durably.Stores) -> None:
        self.count = 0
        checkpointer: Any = stores.checkpointer
        load = checkpointer.load

        async def counted(workflow: str) -> dict[str, object]:
            self.count += 1
            return dict(await load(workflow))

        checkpointer.load = counted


async def test_a_start_in_a_tenant_reads_nothing_on_a_store_of_tenant_scopes() -> None:
    app = durably.App("memory://", clock=ManualClock())

    @app.workflow(name="quiet")
    async def quiet(ctx: durably.Context) -> None:
        return None

    loads = _CountedLoads(await app.stores())
    for n in range(5):
        await quiet.start(id=f"wf-{n}", tenant="acme")
    assert loads.count == 0
    await app.close()


async def test_a_store_of_an_earlier_release_is_looked_up_under_bare_ids_too(
    tmp_path: Path,
) -> None:
    dsn = f"sqlite:///{tmp_path / 'old.db'}"
    first = durably.App(dsn)
    checkpointer = (await first.stores()).checkpointer
    assert await checkpointer.load(MARKER)  # an empty store is marked at once
    await checkpointer.supply("someone-else", "input", 1)
    await checkpointer.discard(MARKER)  # as if an earlier release wrote it
    await first.close()
    app = durably.App(dsn)

    @app.workflow(name="looked")
    async def looked(ctx: durably.Context) -> None:
        return None

    loads = _CountedLoads(await app.stores())
    await looked.start(id="wf-1", tenant="acme")
    assert loads.count == 1  # the bare id, where an earlier release kept it
    await looked.start(id="wf-1")
    assert loads.count == 1  # the default tenant's key is the bare id already
    await app.close()
