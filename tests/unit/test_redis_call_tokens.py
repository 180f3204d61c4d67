"""The token each Redis enqueue call carries, by which a retry finds the item it wrote:
no two calls share one, in one process or across a fork."""

from __future__ import annotations

import multiprocessing
import sys

import pytest

from durably.redis.queue import _CallTokens


def test_every_call_draws_a_token_of_its_own() -> None:
    tokens = _CallTokens()
    drawn = [tokens.next() for _ in range(10_000)]
    assert len(set(drawn)) == len(drawn)


def _draw(tokens: _CallTokens, out: multiprocessing.SimpleQueue[str]) -> None:
    out.put(tokens.next())


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_forked_child_draws_tokens_no_parent_call_draws() -> None:
    tokens = _CallTokens()
    context = multiprocessing.get_context("fork")
    out: multiprocessing.SimpleQueue[str] = context.SimpleQueue()
    child = context.Process(target=_draw, args=(tokens, out))
    child.start()
    child.join()
    theirs = out.get()
    ours = [tokens.next() for _ in range(3)]
    assert theirs not in ours
    assert theirs[:12] != ours[0][:12]  # a prefix drawn again, not the parent's
