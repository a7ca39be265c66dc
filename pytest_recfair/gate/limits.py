"""The gate's settings and their one check: absolute limits, tolerance, alpha. Stdlib only,
so ``settings`` (imported at pytest start-up) reads them without importing numpy."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from pytest_recfair.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Absolute limits (entropy in bits, the rest in [0, 1]); ``None`` switches one off."""

    max_snsr: float | None = None
    max_snsv: float | None = None
    min_pafs: float | None = None
    max_entropy: float | None = None
    max_refusal_gap: float | None = None
    max_unusable: float | None = None
    # quality beside fairness, checked by the list-overlap kind (engine/overlap/qualitygate)
    min_quality: float | None = None
    max_quality_gap: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"threshold {f.name} must be a number or None; got "
                    f"{type(value).__name__} {value!r}. Set e.g. @fairness({f.name}=0.1)."
                )
            upper = math.inf if f.name == "max_entropy" else 1.0
            if not (0.0 <= float(value) <= upper):
                allowed = ">= 0 (bits)" if f.name == "max_entropy" else "between 0 and 1"
                raise ConfigError(
                    f"threshold {f.name} must be {allowed}; got {value!r}. "
                    f"Similarities, SNSR/SNSV/PAFS and rates all lie in [0, 1]."
                )


#: The absolute limits, by name: the marker arguments and ``recfair_<name>`` ini keys.
THRESHOLD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Thresholds))


def check_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float, or a ConfigError saying what is allowed (its one check)."""
    t = tolerance
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t < math.inf:
        raise ConfigError(
            f"tolerance must be a finite number >= 0 (how much a statistic may worsen against "
            f"its baseline); got {type(t).__name__} {t!r}. Use e.g. @fairness(tolerance=0.02) "
            f"or the ini key recfair_tolerance = 0.02."
        )
    return float(t)


def check_alpha(alpha: object) -> float:
    """``alpha`` (the drift test's significance level) as a float in (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise ConfigError(
            f"alpha (significance level of the baseline comparison) must be a number strictly "
            f"between 0 and 1, e.g. 0.05; got {alpha!r}."
        )
    return float(alpha)
