"""The demo's agents: pydantic-ai agents made durable with `DurableAgent` on the demo's
App (`durably.demo.app`), which importing this module registers them on.

Each agent's model is a pydantic-ai `FunctionModel` playing a scripted model: for the task
it is given, it calls that task's tools one per turn, then answers. Every request goes to
the simulated provider, which bills it in its own table. `DurableAgent` makes each request
and each tool call a step, and adds each response's tokens and cost (at `PRICES`) to the
run's record with ``ctx.add_usage``. The sales agent's ``send_email`` needs a human's
approval; the weather tool fails its first attempt and is retried as a durable step. One
run first sleeps durably: the `digest` workflow sleeps, then runs its agent as a child.

Served by ``durably worker durably.demo.agent:app --dsn sqlite:///durably-demo.db``.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import durably
from durably.demo.app import SCRIPTS, WORKER_ENV, agent_run_id, app, batch_of
from durably.demo.ledger import Ledger, Origin
from durably.demo.provider import (
    INPUT_MICROS_PER_TOKEN,
    MODEL,
    OUTPUT_MICROS_PER_TOKEN,
    FlakyToolError,
    SimulatedProvider,
    upstream,
)
from durably.pydantic_ai import DurableAgent, Price

PRICES = {MODEL: Price(input=INPUT_MICROS_PER_TOKEN, output=OUTPUT_MICROS_PER_TOKEN)}
"""What the runs' records charge per token: the provider's own prices."""
TOOL_RETRY = durably.Retry(max_attempts=3, initial=0.5, maximum=2.0)
"""How a failed tool call is retried: as a durable step, after a backoff."""
_BY_TASK = {script.task: script for script in SCRIPTS}


# --- the simulated model and the tools (each runs inside its durable step) ---------------


async def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The task's next tool call, or its answer once every call is made; each request is
    billed by the provider when it answers."""
    script = _BY_TASK[_task_of(messages)]
    turn = 1 + sum(isinstance(m, ModelResponse) for m in messages)
    bill = await SimulatedProvider(await _ledger()).complete(_origin())
    usage = RequestUsage(input_tokens=bill.input_tokens, output_tokens=bill.output_tokens)
    if turn > len(script.calls):
        tools = ", ".join(tool for tool, _ in script.calls)
        return ModelResponse(
            parts=[TextPart(f"{script.task}: done ({tools})")], usage=usage, model_name=MODEL
        )
    tool, argument = script.calls[turn - 1]
    call = ToolCallPart(tool, {_parameter(info, tool): argument}, tool_call_id=f"call-{turn}")
    return ModelResponse(parts=[call], usage=usage, model_name=MODEL)


def _task_of(messages: list[ModelMessage]) -> str:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    prompt = next(part for part in first.parts if isinstance(part, UserPromptPart))
    return str(prompt.content)


def _parameter(info: AgentInfo, tool: str) -> str:
    """The name of ``tool``'s one parameter, read from the schema the agent offers."""
    definition = next(t for t in info.function_tools if t.name == tool)
    return str(next(iter(definition.parameters_json_schema["properties"])))


async def search(query: str) -> list[str]:
    """Search the company's documents."""
    async with _tool_call("search", query):
        return [f"{query}: source {n}" for n in range(1, 4)]


async def calculator(expression: str) -> float:
    """Work out a figure."""
    async with _tool_call("calculator", expression) as draw:
        return round(draw % 100_000 / 100, 2)


async def draft_email(topic: str) -> dict[str, object]:
    """Draft an e-mail."""
    async with _tool_call("draft_email", topic) as draw:
        return {"subject": f"About {topic}", "words": 120 + draw % 80}


async def send_email(subject: str) -> str:
    """Send the drafted e-mail (a human approves it first)."""
    async with _tool_call("send_email", subject) as draw:
        return f"sent {subject!r} as msg-{draw % 1_000_000:06d}"


async def weather(city: str) -> dict[str, object]:
    """The forecast for a city (its upstream times out on a first attempt)."""
    async with _tool_call("weather", city) as draw:
        if durably.context().attempt == 1:
            raise FlakyToolError("weather service timed out (HTTP 504)")
        return {"city": city, "forecast": ("sun", "rain", "wind")[draw % 3]}


async def lookup_order(order: str) -> dict[str, object]:
    """Look an order up."""
    async with _tool_call("lookup_order", order) as draw:
        return {"order": order, "total": round(draw % 50_000 / 100, 2), "damaged": True}


async def refund(order: str) -> str:
    """Refund an order."""
    async with _tool_call("refund", order) as draw:
        return f"refunded {order} as rf-{draw % 100_000:05d}"


@asynccontextmanager
async def _tool_call(tool: str, argument: str) -> AsyncIterator[int]:
    """A tool's call to its simulated upstream; the tool logs each attempt, ran or failed.

    Yields a number drawn from the request, for the tool to derive its answer from.
    """
    origin, ledger = _origin(), await _ledger()
    draw = await upstream(tool, argument)
    try:
        yield draw
    except FlakyToolError:
        await ledger.record_tool_run(origin, tool, "failed", time.time())
        raise
    await ledger.record_tool_run(origin, tool, "ran", time.time())


async def _ledger() -> Ledger:
    return Ledger((await app.stores()).database)


def _origin() -> Origin:
    step = durably.context()
    worker = os.environ.get(WORKER_ENV) or f"pid-{os.getpid()}"
    return Origin(batch_of(step.workflow), step.tenant, step.workflow, step.step, worker)


# --- the agents and the workflow that sleeps first ----------------------------------------

TOOLS: dict[str, tuple[Tool[None], ...]] = {
    "research-agent": (Tool(search), Tool(calculator)),
    "sales-agent": (Tool(draft_email), Tool(send_email, requires_approval=True)),
    "ops-agent": (Tool(weather), Tool(calculator)),
    "support-agent": (Tool(lookup_order), Tool(refund), Tool(search)),
}


def _durable(name: str, tools: tuple[Tool[None], ...]) -> DurableAgent[None, str]:
    agent = Agent(FunctionModel(scripted_model, model_name=MODEL), name=name, tools=tools)
    return DurableAgent(agent, app, prices=PRICES, tool_retry=TOOL_RETRY)


AGENTS = {name: _durable(name, tools) for name, tools in TOOLS.items()}
"""The durable agents, by name (each name is its workflow kind)."""


@app.workflow(name="digest")
async def digest(ctx: durably.Context, task: str, seconds: float) -> str:
    """Wait for the incident window to close (a durable sleep: no process holds the run),
    then run the research agent on ``task`` as a child workflow."""
    await ctx.sleep(seconds)
    research = AGENTS["research-agent"].workflow.options(id=agent_run_id(ctx.id))
    answer: Any = await ctx.child(research, task)
    return str(answer)


__all__ = ["AGENTS", "PRICES", "TOOLS", "TOOL_RETRY", "app", "digest", "scripted_model"]
