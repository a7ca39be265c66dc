"""Argument checks shared by the metrics submodules.

Every check names the argument, what was expected and what was given, so a wrong call
from a notebook or a marker says how to fix it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from pytest_recfair.errors import ConfigError
from pytest_recfair.vocab import (
    METRICS,
    MISSING_POLICIES,
    STATISTICS,
    VARIANTS,
    MetricName,
    MissingPolicy,
    Statistic,
    Variant,
)


def _choice(value: object, allowed: tuple[str, ...], name: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(
            f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}. "
            f"Pass one of the allowed names."
        )
    return value


def check_variant(variant: object) -> Variant:
    return cast(Variant, _choice(variant, VARIANTS, "variant"))


def check_metric(metric: object) -> MetricName:
    return cast(MetricName, _choice(metric, METRICS, "metric"))


def check_missing(missing: object) -> MissingPolicy:
    return cast(MissingPolicy, _choice(missing, MISSING_POLICIES, "missing"))


def check_statistic(statistic: object) -> Statistic:
    return cast(Statistic, _choice(statistic, STATISTICS, "statistic"))


def check_positive_int(value: object, name: str) -> int:
    """A strictly positive integer; bool and float are refused even when integral."""
    if isinstance(value, bool | float):
        raise TypeError(f"{name} must be a positive int; got {type(value).__name__} {value!r}.")
    try:
        ivalue = operator.index(cast(Any, value))
    except TypeError:
        raise TypeError(
            f"{name} must be a positive int; got {type(value).__name__} {value!r}."
        ) from None
    if ivalue <= 0:
        raise ConfigError(f"{name} must be a positive int (>= 1); got {ivalue}.")
    return ivalue


def check_k(k: object, name: str = "k") -> int | None:
    """``None`` (use the full lists) or a positive int."""
    if k is None:
        return None
    return check_positive_int(k, name)


def check_confidence(confidence: object) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise TypeError(f"confidence must be a float in (0, 1); got {confidence!r}.")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}.")
    return c


def make_rng(seed: object) -> np.random.Generator:
    """The only source of randomness: an explicit int seed or a caller's Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(
            f"seed must be an int or a numpy.random.Generator; got {type(seed).__name__} {seed!r}."
        )
    if int(seed) < 0:
        raise ConfigError(f"seed must be a non-negative int; got {seed!r}.")
    return np.random.default_rng(int(seed))


def check_list(items: object, name: str) -> list[str]:
    """A ranked list: a sequence (not a string) of str items."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise TypeError(
            f"{name} must be a list of str (a ranked recommendation list); got "
            f"{type(items).__name__} {_short(items)}."
        )
    out = list(items)
    for i, x in enumerate(out):
        if not isinstance(x, str):
            raise TypeError(
                f"{name}[{i}] must be a str item; got {type(x).__name__} {x!r}. "
                f"Parse replies to lists of strings first (missing items are not allowed)."
            )
    return out


def truncate(items: list[str], k: int | None) -> list[str]:
    return items if k is None else items[:k]


def _short(x: object) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."
