"""Durable pydantic-ai agents: `DurableAgent` runs an agent as a workflow of an App.

Needs the ``pydantic-ai`` extra (``pip install 'durably[pydantic-ai]'``): this package is
the only part of durably that imports pydantic-ai.
"""

from durably.pydantic_ai._agent import APPROVALS_EVENT, Approval, DurableAgent, PendingApproval
from durably.pydantic_ai._prices import Price

__all__ = ["APPROVALS_EVENT", "Approval", "DurableAgent", "PendingApproval", "Price"]
