"""``durably workflows`` across tenants: ``list --tenant``, and ``show``, ``resume`` and
``delete`` in the tenant ``--tenant`` names, each showing the tenant and the user's id."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durably
from durably.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _seed(path: Path) -> None:
    """``inv-1001`` in acme and in globex (different arguments), two more of acme's, and
    one of the default tenant's, all run to their end."""

    async def seed() -> None:
        app = durably.App(f"sqlite:///{path}", clock=durably.ManualClock())

        @app.workflow(name="invoice")
        async def invoice(ctx: durably.Context, cents: int) -> str:
            return f"{ctx.tenant}:{cents}"

        async with app:
            await invoice.start(4999, id="inv-1001", tenant="acme")
            await invoice.start(1, id="inv-1001", tenant="globex")
            await invoice.start(2, id="inv-1002", tenant="acme")
            await invoice.start(3, id="inv-1003", tenant="acme")
            await invoice.start(4, id="inv-0001")
            await app.run_until_idle()

    asyncio.run(seed())


async def _as_an_earlier_release(path: Path) -> None:
    """Store globex's ``inv-0900`` under its bare id, as releases before tenant scopes
    did, in a store without the record saying it holds none."""
    stores = await durably.open_stores(f"sqlite:///{path}")
    try:
        start = {"kind": "invoice", "args": {"cents": 9}, "tenant": "globex", "created": 0.0}
        await stores.checkpointer.supply("inv-0900", "durably:start", start)
        await stores.checkpointer.discard("durably:tenancy")
    finally:
        await stores.close()


def _cli(path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "DURABLY_DSN": f"sqlite:///{path}"}
    return subprocess.run(
        [sys.executable, "-m", "durably", "workflows", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_workflows_list_shows_each_tenant_and_id_and_filters_by_tenant(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    _seed(path)
    every = _cli(path, "list", "--store-order", "--json")
    assert every.returncode == 0, every.stderr
    rows = json.loads(every.stdout)["workflows"]
    assert sorted((w["tenant"], w["workflow"]) for w in rows) == [
        ("acme", "inv-1001"),
        ("acme", "inv-1002"),
        ("acme", "inv-1003"),
        ("default", "inv-0001"),
        ("globex", "inv-1001"),
    ]
    assert all(w["status"]["workflow"] == w["workflow"] for w in rows)
    assert all(w["status"]["tenant"] == w["tenant"] for w in rows)
    first = _cli(path, "list", "--store-order", "--tenant", "acme", "--limit", "2", "--json")
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert [(w["tenant"], w["workflow"]) for w in page["workflows"]] == [
        ("acme", "inv-1001"),
        ("acme", "inv-1002"),
    ]
    rest = _cli(
        path, "list", "--store-order", "--tenant", "acme", "--after", page["next_after"], "--json"
    )
    assert [w["workflow"] for w in json.loads(rest.stdout)["workflows"]] == ["inv-1003"]
    table = _cli(path, "list", "--store-order", "--tenant", "globex")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["tenant", "workflow", "kind"]
    assert [line.split()[:2] for line in lines[2:]] == [["globex", "inv-1001"]]
    assert "durably:" not in table.stdout
    none = _cli(path, "list", "--store-order", "--tenant", "initech")
    assert "no workflows of tenant 'initech'" in none.stdout


def test_show_resume_and_delete_act_in_the_tenant_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.db"
    _seed(path)
    dsn = f"sqlite:///{path}"
    assert main(["workflows", "show", "inv-1001", "--dsn", dsn]) == 1
    assert "no workflow 'inv-1001'" in capsys.readouterr().err
    assert main(["workflows", "show", "inv-1001", "--tenant", "acme", "--dsn", dsn, "--json"]) == 0
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (shown["tenant"], shown["workflow"], shown["status"]["workflow"]) == (
        "acme",
        "inv-1001",
        "inv-1001",
    )
    assert shown["history"][0]["value"]["args"] == {"cents": 4999}
    assert main(["workflows", "show", "inv-1001", "--tenant", "globex", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["tenant    globex", "workflow  inv-1001"]
    assert main(["workflows", "resume", "inv-1001", "--tenant", "initech", "--dsn", dsn]) == 1
    assert "of tenant 'initech'" in capsys.readouterr().err
    argv = ["workflows", "delete", "inv-1001", "--tenant", "globex", "--dsn", dsn, "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["tenant"] == "globex"
    assert main(["workflows", "show", "inv-1001", "--tenant", "globex", "--dsn", dsn]) == 1
    capsys.readouterr()
    assert main(["workflows", "show", "inv-1001", "--tenant", "acme", "--dsn", dsn]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:  # the store's own record is no workflow
        main(["workflows", "show", "durably:tenancy", "--dsn", dsn])
    assert refused.value.code == 2
    assert "reserved" in capsys.readouterr().err


def test_a_workflow_an_earlier_release_stored_is_listed_and_shown_in_its_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.db"
    _seed(path)
    asyncio.run(_as_an_earlier_release(path))
    listed = _cli(path, "list", "--store-order", "--tenant", "globex", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["workflows"]
    assert sorted((w["tenant"], w["workflow"]) for w in rows) == [
        ("globex", "inv-0900"),
        ("globex", "inv-1001"),
    ]
    dsn = f"sqlite:///{path}"
    assert main(["workflows", "show", "inv-0900", "--dsn", dsn]) == 1
    assert main(["workflows", "show", "inv-0900", "--tenant", "globex", "--dsn", dsn]) == 0
    assert "tenant    globex" in capsys.readouterr().out


def test_settle_tenants_records_only_once_no_earlier_workflow_remains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.db"
    _seed(path)
    dsn = f"sqlite:///{path}"

    async def loads_of_a_start_in_a_tenant() -> int:
        app = durably.App(dsn)

        @app.workflow(name="invoice")
        async def invoice(ctx: durably.Context, cents: int) -> str:
            return str(cents)

        loads: list[str] = []
        checkpointer: Any = (await app.stores()).checkpointer
        load = checkpointer.load

        async def counted(workflow: str) -> dict[str, object]:
            loads.append(workflow)
            return dict(await load(workflow))

        checkpointer.load = counted
        await invoice.start(1, id="inv-2000", tenant="acme")
        await app.close()
        return len(loads)

    asyncio.run(_as_an_earlier_release(path))
    assert main(["workflows", "settle-tenants", "--dsn", dsn, "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "settled": False,
        "remaining": [{"tenant": "globex", "workflow": "inv-0900"}],
    }
    assert asyncio.run(loads_of_a_start_in_a_tenant()) == 1  # under the bare id too
    argv = ["workflows", "delete", "inv-0900", "--tenant", "globex", "--dsn", dsn]
    assert main(argv) == 0
    assert main(["workflows", "settle-tenants", "--dsn", dsn]) == 0
    assert "recorded" in capsys.readouterr().out
    assert asyncio.run(loads_of_a_start_in_a_tenant()) == 0
