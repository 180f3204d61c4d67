"""An App the CLI tests start workflows of (``opsflows:greet``), served in-process."""

from __future__ import annotations

import os

import durably

app = durably.App(os.environ.get("DURABLY_DSN"))
NOTE = durably.Topic("note", str)


@app.step(name="shout")
async def shout(text: str) -> str:
    return text.upper()


@app.workflow(name="greet")
async def greet(ctx: durably.Context, name: str) -> str:
    loud = await shout(name)
    note = await ctx.recv(NOTE)
    return f"{loud} {note}"
