"""`DurableAgent`: a pydantic-ai agent whose run is a durable workflow of an App."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, infer_model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool

from durably.app import App, Context, Retry, Topic, WorkflowHandle, context
from durably.errors import ConfigurationError, NonRetryable
from durably.pydantic_ai._model import DurableModel
from durably.pydantic_ai._prices import Price, checked_prices, cost_micros
from durably.pydantic_ai._toolset import durable_toolset

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")

DEFAULT_RETRY = Retry(max_attempts=3)
"""How model requests and tool calls are retried unless the agent says otherwise."""
APPROVALS_EVENT = "approvals"
"""The event a waiting run publishes: the tool calls it waits for answers to."""
_KEY_BYTES = 200


class Approval(BaseModel):
    """The answer to a tool call that needs approval, sent to the run's `approvals` topic.

    Args:
        tool_call_id: The id of the call, as the ``approvals`` event lists it.
        approved: Whether the tool may run.
        message: What the model is told when the call is denied.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    tool_call_id: str
    approved: bool
    message: str | None = None


class PendingApproval(BaseModel):
    """A tool call a run waits to have approved (the ``approvals`` event lists them)."""

    model_config = ConfigDict(frozen=True)
    tool_call_id: str
    tool_name: str
    args: Any = None


@dataclass
class _Live:
    """What a step needs that is not among its recorded arguments."""

    call: Callable[[], Any]
    ran: bool = False


@dataclass
class AgentRun:
    """One pass of one agent run: numbers its model requests and keys its tool calls."""

    agent: DurableAgent[Any, Any]
    ctx: Context
    turn: int = 0
    tools: dict[str, int] = field(default_factory=dict)

    async def request(
        self,
        model: Model,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
    ) -> tuple[ModelResponse, bool]:
        """Model request number ``turn``: made once, recorded; its usage added once.

        Returns the response and whether this pass made it (False: read from the record).
        """
        self.turn += 1
        turn = self.turn

        async def call() -> JsonValue:
            response = await model.request(messages, settings, parameters)
            return _RESPONSE.dump_python(response, mode="json")  # type: ignore[no-any-return]

        live = _Live(call)
        response = await self.agent._live_step(self.ctx, ("model", turn), live, self._model(turn))
        usage = response.usage
        await self.ctx.add_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_micros=cost_micros(self.agent._price(model.model_name), usage),
            requests=1,
        )
        return response, live.ran

    def _model(self, turn: int) -> Callable[[], Any]:
        step = self.agent._model_step.keyed(f"model-{turn}")
        return lambda: step(turn)

    async def call_tool(
        self,
        toolset: AbstractToolset[Any],
        name: str,
        args: dict[str, Any],
        run_ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        """Tool call ``name``: run once, recorded; a recorded `ModelRetry` or deferral is
        raised again on every pass, as the first pass raised it."""
        call_id = run_ctx.tool_call_id
        if call_id is None:  # a call no model response named: number it
            count = self.tools.get(name, 0) + 1
            self.tools[name] = count
            call_id = f"{name}#{count}"
        key = _tool_key(self.turn, call_id)

        async def call() -> JsonValue:
            try:
                value = await toolset.call_tool(name, args, run_ctx, tool)
                return {"value": _JSON.dump_python(value, mode="json")}
            except ModelRetry as exc:
                return {"retry": exc.message}
            except ApprovalRequired as exc:
                return {"approval": exc.metadata}
            except CallDeferred as exc:
                return {"deferred": exc.metadata}

        step = self.agent._tool_step.keyed(key)
        arguments = _JSON.dump_python(args, mode="json")  # checked on replay: same call
        live = _Live(call)
        outcome = await self.agent._live_step(
            self.ctx, ("tool", key), live, lambda: step(self.turn, call_id, name, arguments)
        )
        if "retry" in outcome:
            raise ModelRetry(str(outcome["retry"]))
        if "approval" in outcome:
            raise ApprovalRequired(metadata=outcome["approval"])
        if "deferred" in outcome:
            raise CallDeferred(metadata=outcome["deferred"])
        return outcome.get("value")


def _tool_key(turn: int, call_id: str) -> str:
    key = f"{turn}-{call_id}"
    if len(key.encode()) > _KEY_BYTES:  # a provider's long id: its digest keys it
        key = f"{turn}-{hashlib.sha256(call_id.encode()).hexdigest()}"
    return key


class DurableAgent(Generic[DepsT, OutputT]):
    """A pydantic-ai `Agent` whose runs are durable workflows of an `App`.

    Each model request and each tool call (function tools, MCP tools, any toolset) is a
    step: a run resumed after a crash replays what was recorded and pays for no recorded
    request again. Each response's tokens and cost go to the run's record
    (`WorkflowHandle.run_record`). Tools that need approval make the run wait, holding no
    process, until `Approval` answers arrive on `approvals` (``handle.send``). The
    agent's output is the workflow's result.

    Args:
        agent: The agent. Its model, tools and toolsets are wrapped per run through
            pydantic-ai's public interfaces; the agent itself is not changed.
        app: The App whose workflow runs it.
        name: The workflow's kind and the prefix of its step names. Default: the
            agent's name.
        prices: Per model name, what its tokens cost (`Price`); a model left out costs 0.
        deps: Makes the agent's dependencies in the worker, for each pass.
        model_retry: How failed model requests are retried (default: 3 attempts).
        tool_retry: How failed tool calls are retried (default: 3 attempts).
        event_stream_handler: Sees the run's events, as with ``agent.run``. Model events
            come from the pass that made the request; tool events from each pass.
        timeout: Cancels the run at this deadline (seconds or a timedelta), if given.

    Raises:
        ConfigurationError: No name, an agent without a model, or a name taken on the App.
        InvalidInputError: A price table that is not one (a negative price, say).
    """

    def __init__(
        self,
        agent: Agent[DepsT, OutputT],
        app: App,
        *,
        name: str | None = None,
        prices: Mapping[str, Price] | None = None,
        deps: Callable[[], DepsT] | None = None,
        model_retry: Retry | None = None,
        tool_retry: Retry | None = None,
        event_stream_handler: Any = None,
        timeout: float | None = None,
    ) -> None:
        self.prices = checked_prices(prices)
        kind = name if name is not None else agent.name
        if not kind:
            raise ConfigurationError("DurableAgent needs a name: pass name= or name the agent")
        if agent.model is None:
            raise ConfigurationError(f"DurableAgent {kind!r}: the agent has no model")
        self.agent = agent
        self.name = kind
        self._model = infer_model(agent.model)
        self._deps = deps
        self._handler = event_stream_handler
        self._live: dict[tuple[str, str, str, object], _Live] = {}
        self.approvals: Topic[Approval] = Topic(f"{kind}.approvals", Approval)
        """Where `Approval` answers to tool calls that need one are sent."""

        async def model_request(turn: int) -> JsonValue:
            return await self._run_live(("model", turn))  # type: ignore[no-any-return]

        async def tool_call(turn: int, call_id: str, tool: str, args: JsonValue) -> JsonValue:
            return await self._run_live(("tool", _tool_key(turn, call_id)))  # type: ignore[no-any-return]

        self._model_step = app.step(name=f"{kind}.model", retry=model_retry or DEFAULT_RETRY)(
            model_request
        )
        self._tool_step = app.step(name=f"{kind}.tool", retry=tool_retry or DEFAULT_RETRY)(
            tool_call
        )

        async def body(ctx: Context, prompt: str) -> Any:
            return await self._drive(ctx, prompt)

        output = agent.output_type
        body.__annotations__ = {
            "ctx": Context,
            "prompt": str,
            "return": output if isinstance(output, type) else Any,
        }
        body.__qualname__ = body.__name__ = kind.replace(".", "_")
        self.workflow = app.workflow(name=kind, timeout=timeout)(body)
        """The App workflow that runs the agent (``start``, ``run``, ``get_handle``)."""

    async def start(
        self, prompt: str, *, id: str | None = None, tenant: str | None = None
    ) -> WorkflowHandle[OutputT]:
        """Start a run of the agent on ``prompt``; its handle.

        Args:
            prompt: The user prompt.
            id: The run's id (a workflow id): starting an id that exists returns its handle.
            tenant: The tenant to run it for (default: the App's).
        """
        return await self.workflow.start(prompt, id=id, tenant=tenant)

    async def run(
        self, prompt: str, *, id: str | None = None, tenant: str | None = None
    ) -> OutputT:
        """Start a run and wait for its output (served by a worker of the App)."""
        handle = await self.start(prompt, id=id, tenant=tenant)
        return await handle.result()

    def _price(self, model: str) -> Price | None:
        return self.prices.get(model)

    async def _run_live(self, what: tuple[str, object]) -> Any:
        step = context()
        live = self._live[(step.tenant, step.workflow, what[0], what[1])]
        live.ran = True
        return await live.call()

    async def _live_step(
        self,
        ctx: Context,
        what: tuple[str, object],
        live: _Live,
        step: Callable[[], Any],
    ) -> Any:
        """Run ``step`` with ``live`` at hand for its function (the messages, the toolset:
        what is not among its recorded arguments), and decode a model response."""
        slot = (ctx.tenant, ctx.id, what[0], what[1])
        self._live[slot] = live
        try:
            value = await step()
        finally:
            self._live.pop(slot, None)
        if what[0] == "model":
            return _RESPONSE.validate_python(value)
        return value

    async def _drive(self, ctx: Context, prompt: str) -> Any:
        run = AgentRun(self, ctx)
        toolsets = [durable_toolset(toolset, run) for toolset in self.agent.toolsets]
        deps = self._deps() if self._deps is not None else None
        output_type = _with_deferrals(self.agent.output_type)
        history: list[ModelMessage] | None = None
        results: DeferredToolResults | None = None
        asked: str | None = prompt
        with self.agent.override(model=DurableModel(self._model, run), toolsets=toolsets, tools=[]):
            while True:
                turn = run.turn
                try:
                    result = await self.agent.run(
                        asked,
                        message_history=history,
                        deferred_tool_results=results,
                        deps=deps,  # type: ignore[arg-type]
                        output_type=output_type,
                        event_stream_handler=self._handler,
                    )
                except UserError:
                    # An agent with output validators takes no run output type; it said so
                    # before any request, so nothing was recorded: run it as it is.
                    if output_type is None or run.turn != turn:
                        raise
                    output_type = None
                    continue
                output = result.output
                if not isinstance(output, DeferredToolRequests):
                    return output
                if output.calls:
                    raise NonRetryable(
                        f"agent {self.name!r}: tools deferred for outside execution "
                        f"({', '.join(c.tool_name for c in output.calls)}) are not supported; "
                        "use requires_approval=True"
                    )
                results = DeferredToolResults(approvals=await self._approvals(ctx, output))
                history, asked = result.all_messages(), None

    async def _approvals(
        self, ctx: Context, requests: DeferredToolRequests
    ) -> dict[str, bool | ToolApproved | ToolDenied]:
        """Wait for an `Approval` of each call in ``requests`` (answers to other calls are
        skipped, a later answer to the same call too)."""
        pending = [
            PendingApproval(tool_call_id=c.tool_call_id, tool_name=c.tool_name, args=c.args)
            for c in requests.approvals
        ]
        await ctx.set_event(APPROVALS_EVENT, [p.model_dump(mode="json") for p in pending])
        wanted = {p.tool_call_id for p in pending}
        answers: dict[str, bool | ToolApproved | ToolDenied] = {}
        while wanted - answers.keys():
            answer = await ctx.recv(self.approvals)
            assert answer is not None  # no timeout
            if answer.tool_call_id not in wanted or answer.tool_call_id in answers:
                ctx.logger.warning("skipped an answer to tool call %r", answer.tool_call_id)
                continue
            answers[answer.tool_call_id] = (
                True
                if answer.approved
                else ToolDenied(answer.message or "The tool call was denied.")
            )
        await ctx.set_event(APPROVALS_EVENT, [])
        return answers


def _with_deferrals(output: Any) -> Any:
    """The run's output type with `DeferredToolRequests` among its choices."""
    choices = list(output) if isinstance(output, list | tuple) else [output]
    if DeferredToolRequests in choices:
        return None
    return [*choices, DeferredToolRequests]


_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_JSON: TypeAdapter[Any] = TypeAdapter(Any)

__all__ = ["APPROVALS_EVENT", "AgentRun", "Approval", "DurableAgent", "PendingApproval"]
