"""`DurableToolset`: a pydantic-ai toolset whose tool calls are durable steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.wrapper import WrapperToolset

if TYPE_CHECKING:
    from durably.pydantic_ai._agent import AgentRun


@dataclass
class DurableToolset(WrapperToolset[Any]):
    """Wraps one of the agent's toolsets (function tools, an MCP server, any other) for one
    pass of one run: each call is a step, keyed by the model turn and the tool call's id,
    so concurrent calls find their records in any order.

    Listing the tools is not recorded: it is read afresh on every pass (a server whose
    tools change under a run in flight may change what a replay offers the model, never
    what a recorded call returned).
    """

    agent_run: AgentRun | None = None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        assert self.agent_run is not None
        return await self.agent_run.call_tool(self.wrapped, name, tool_args, ctx, tool)


def durable_toolset(toolset: AbstractToolset[Any], run: AgentRun) -> AbstractToolset[Any]:
    """``toolset`` with each of its leaf toolsets wrapped in a `DurableToolset` for ``run``."""
    return toolset.visit_and_replace(lambda leaf: DurableToolset(leaf, agent_run=run))


__all__ = ["DurableToolset", "durable_toolset"]
