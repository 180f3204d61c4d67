"""`Price`: what a model's tokens cost, and the cost of one response's usage."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict
from pydantic_ai.usage import RequestUsage

from durably.errors import InvalidInputError

_FIELDS = ("input", "output", "cache_read", "cache_write")


class Price(BaseModel):
    """What a model charges, in dollars per million tokens.

    ``Price(input=3, output=15)`` is $3 per million prompt tokens and $15 per million
    completion tokens. Cache reads and writes are priced apart; a price left out is zero.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    cache_read: Decimal = Decimal(0)
    cache_write: Decimal = Decimal(0)


def checked_prices(prices: Mapping[str, Price] | None) -> dict[str, Price]:
    """``prices`` as a dict, each a `Price` of finite, non-negative amounts.

    Raises:
        InvalidInputError: Naming the model and the price refused (before any run).
    """
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise InvalidInputError(
            f"prices must map model names to Price, got {type(prices).__name__}"
        )
    checked: dict[str, Price] = {}
    for model, price in prices.items():
        if not isinstance(model, str) or not model:
            raise InvalidInputError(f"prices: a model name must be a non-empty str, got {model!r}")
        if not isinstance(price, Price):
            raise InvalidInputError(
                f"prices[{model!r}] must be a durably.pydantic_ai.Price, got {type(price).__name__}"
            )
        for name in _FIELDS:
            amount = getattr(price, name)
            if not amount.is_finite() or amount < 0:
                raise InvalidInputError(
                    f"prices[{model!r}].{name} must be a finite amount of 0 or more, got {amount}"
                )
        checked[model] = price
    return checked


def cost_micros(price: Price | None, usage: RequestUsage) -> int:
    """What ``usage`` cost at ``price``, in millionths of a dollar (0 with no price).

    A dollar per million tokens is a millionth of a dollar per token, so the cost in
    micro-dollars is tokens times the price, rounded half up.
    """
    if price is None:
        return 0
    # pydantic-ai counts cached tokens inside input_tokens: the rest are priced as input.
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    fresh = max(usage.input_tokens - cached, 0)
    total = (
        fresh * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    )
    return int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))


__all__ = ["Price", "checked_prices", "cost_micros"]
