"""The demo's App and the runs of a batch: whose each is, which agent does it, its task,
and what the scripted model does for it.

Imports no pydantic-ai, so the demo can start its first worker process before it loads
the agents (`durably.demo.agent` registers them on this App).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import durably

LEASE = 2.0
"""Seconds a dead worker keeps its workflows before another worker takes them over."""
WORKER_ENV = "DURABLY_DEMO_WORKER"
"""The name a demo worker process gives the provider and the tools (set by the demo)."""

app = durably.App(os.environ.get("DURABLY_DSN") or "sqlite:///durably-demo.db", lease=LEASE)


@dataclass(frozen=True, slots=True)
class Script:
    """One run of a batch: whose, which agent, its task, and what the model does for it.

    The model calls ``calls`` (tool, argument) one per turn, then answers; a run with
    ``sleep`` first sleeps that many seconds durably.
    """

    tenant: str
    name: str
    agent: str
    task: str
    calls: tuple[tuple[str, str], ...]
    sleep: float = 0.0


SCRIPTS = (
    Script(
        "acme",
        "research",
        "research-agent",
        "Compare three vector databases for our search team",
        (("search", "vector database benchmarks"), ("calculator", "cost per million vectors")),
    ),
    Script(
        "acme",
        "incident-digest",
        "research-agent",
        "Summarise last week's incident reports",
        (("search", "incident reports week 41"), ("search", "incident follow-ups")),
        sleep=2.0,
    ),
    Script(
        "globex",
        "renewal-offer",
        "sales-agent",
        "Email the renewal offer to Initrode",
        (("draft_email", "renewal offer"), ("send_email", "renewal offer")),
    ),
    Script(
        "globex",
        "field-briefing",
        "ops-agent",
        "Write the weather briefing for the field team",
        (("weather", "Springfield"), ("calculator", "crew hours")),
    ),
    Script(
        "initech",
        "refund",
        "support-agent",
        "Refund order 4411 if it arrived damaged",
        (("lookup_order", "4411"), ("refund", "4411")),
    ),
    Script(
        "initech",
        "sso-ticket",
        "support-agent",
        "Answer the ticket about setting up SSO",
        (("search", "SSO SAML setup"), ("search", "SSO troubleshooting")),
    ),
)


def run_id(batch: int, name: str) -> str:
    """The workflow id of run ``name`` of ``batch``."""
    return f"b{batch}-{name}"


def agent_run_id(workflow: str) -> str:
    """The id of the agent run the `digest` workflow ``workflow`` starts as its child."""
    return f"{workflow}/agent"


def batch_of(workflow: str) -> int:
    """The batch a run's workflow (or its agent run) belongs to."""
    return int(workflow.split("-", 1)[0].removeprefix("b"))


__all__ = [
    "LEASE",
    "SCRIPTS",
    "WORKER_ENV",
    "Script",
    "agent_run_id",
    "app",
    "batch_of",
    "run_id",
]
