"""`DurableModel`: a pydantic-ai model whose requests are durable steps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

if TYPE_CHECKING:
    from durably.pydantic_ai._agent import AgentRun


class DurableModel(WrapperModel):
    """Wraps the agent's model for one pass of one run: each request is a step.

    The first pass that makes request N calls the real model and records its response;
    later passes (after a crash, a wait, a sleep) read it from the record and pay nothing.
    Each response's usage and cost go to the run's counters once (`Context.add_usage`).
    """

    def __init__(self, wrapped: Model, run: AgentRun) -> None:
        super().__init__(wrapped)
        self._agent_run = run

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response, _ = await self._agent_run.request(
            self.wrapped, messages, model_settings, model_request_parameters
        )
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        # The request is made whole, as a step; an event stream handler then sees its parts
        # as events once, on the pass that made it (a replay shows no model events again).
        response, fresh = await self._agent_run.request(
            self.wrapped, messages, model_settings, model_request_parameters
        )
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=fresh
        )


__all__ = ["DurableModel"]
