"""A set argument fanned out into steps replays in another worker process, whose string
hashes (``PYTHONHASHSEED``) order a plain set otherwise, without parking.

Run as a script, this module is one worker process: ``python test_app_set_order.py DSN
LEDGER start|finish WORKFLOW``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from durably import App, Context, Topic

NAMES = ["ada", "grace", "edsger", "barbara", "donald", "alan", "leslie", "tony", "frances"]
GO: Topic[bool] = Topic("go", bool)


def build(dsn: str, ledger: Path) -> App:
    """The App both processes register alike."""
    app = App(dsn)

    @app.step(name="greet")
    async def greet(name: str) -> str:
        with ledger.open("a") as sink:
            sink.write(f"{os.getpid()} {name}\n")
        return f"hello {name}"

    @app.workflow(name="greet-all")
    async def greet_all(ctx: Context, names: set[str]) -> list[str]:
        greetings = [await greet(name) for name in names]
        await ctx.recv(GO)  # the next pass runs in the other process
        return greetings

    return app


async def act(dsn: str, ledger: Path, action: str, workflow: str) -> None:
    app = build(dsn, ledger)
    async with app:
        flow = app.workflows["greet-all"]
        if action == "start":
            await flow.options(id=workflow).start(set(NAMES))
            await app.run_until_idle(advance=False)
        else:
            handle = await flow.get_handle(workflow)
            await handle.send(GO, True)
            await app.run_until_idle(advance=False)
            status = await handle.status()
            print(status.status.value, status.last_error)


def run(seed: int, *args: str) -> str:
    """This module as a worker process under hash seed ``seed``; its output."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def set_order(seed: int) -> list[str]:
    """The order a plain set of `NAMES` iterates in under hash seed ``seed``."""
    done = subprocess.run(
        [sys.executable, "-c", f"print(' '.join(set({NAMES!r})))"],
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def test_a_set_argument_fanned_out_into_steps_replays_under_another_hash_seed(
    tmp_path: Path,
) -> None:
    # The two seeds order a plain set differently: without a stable order, the second
    # process would call the steps in another order and park the workflow.
    assert set_order(1) != set_order(2)
    dsn, ledger = f"sqlite:///{tmp_path / 'app.db'}", tmp_path / "ledger"
    run(1, dsn, str(ledger), "start", "wf-1")
    output = run(2, dsn, str(ledger), "finish", "wf-1")
    assert output.split()[0] == "completed", output
    calls = ledger.read_text().split()
    assert calls[1::2] == sorted(NAMES)  # each step ran once, in the first process
    assert len(set(calls[::2])) == 1


if __name__ == "__main__":
    dsn, ledger, action, workflow = sys.argv[1:5]
    asyncio.run(act(dsn, Path(ledger), action, workflow))
