"""Entity heterogeneity: real models are not equally stable, nor equally biased, for every
seed entity.

A popular director gets much the same list on every call, an obscure one a different list
each time; a demographic cue moves some entities' lists a lot and others' hardly at all.
The simulator models both with two per-entity multipliers, each drawn once per (seed,
domain, entity) uniformly from ``[1 - spread, 1 + spread]`` (mean 1, so the profile's
rates stay the average shift and noise):

- ``stability`` spreads the noise: an entity's re-sampled fraction is ``noise x m``;
- ``sensitivity`` spreads the shift: an entity's shifted fraction is ``rate x m``.

``uniform`` (both 0) is the simulator's original behaviour, and the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_recfair.errors import ConfigError
from pytest_recfair.sim.catalogue import stable_seed

__all__ = ["PROFILES", "Heterogeneity"]


@dataclass(frozen=True)
class Heterogeneity:
    """Spreads (0..1) of the per-entity noise and shift multipliers."""

    stability: float = 0.0
    sensitivity: float = 0.0

    def __post_init__(self) -> None:
        for name in ("stability", "sensitivity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ConfigError(
                    f"heterogeneity: {name} must be a spread between 0 and 1, got {value!r}; "
                    "0 makes every entity alike, 0.8 gives multipliers from 0.2 to 1.8."
                )

    def __bool__(self) -> bool:
        return bool(self.stability or self.sensitivity)

    @classmethod
    def parse(cls, spec: Heterogeneity | Mapping[str, object] | str | None) -> Heterogeneity:
        """From a profile name (:data:`PROFILES`), ``"stability=0.8,sensitivity=0.5"``, a
        mapping with those keys, or None (uniform)."""
        if spec is None:
            return cls()
        if isinstance(spec, Heterogeneity):
            return spec
        if isinstance(spec, str):
            if spec in PROFILES:
                return PROFILES[spec]
            return cls.parse(_pairs(spec))
        if not isinstance(spec, Mapping) or not set(spec) <= {"stability", "sensitivity"}:
            raise ConfigError(
                f"heterogeneity: expected one of {sorted(PROFILES)}, 'stability=S,sensitivity=H' "
                f"or a mapping with those keys; got {spec!r}."
            )
        return cls(**{str(k): v for k, v in spec.items()})  # type: ignore[arg-type]

    def noise_factor(self, seed: int, domain: str, entity: str) -> float:
        return _factor(self.stability, seed, "stability", domain, entity)

    def shift_factor(self, seed: int, domain: str, entity: str) -> float:
        return _factor(self.sensitivity, seed, "sensitivity", domain, entity)


def _factor(spread: float, *parts: object) -> float:
    if not spread:
        return 1.0  # exactly: the uniform profile keeps the original arithmetic
    u = stable_seed(*parts) / 2.0**64
    return 1.0 + spread * (2.0 * u - 1.0)


def _pairs(text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value) if sep else None
        except ValueError:
            out[key.strip()] = value
        if not sep:
            raise ConfigError(
                f"heterogeneity: {item!r} is not a profile ({', '.join(sorted(PROFILES))}) nor "
                "a 'stability=S,sensitivity=H' item."
            )
    return out


#: Named profiles: ``uniform`` (every entity alike, the original simulator) and
#: ``realistic`` (multipliers 0.2..1.8 for both noise and shift).
PROFILES: dict[str, Heterogeneity] = {
    "uniform": Heterogeneity(),
    "realistic": Heterogeneity(stability=0.8, sensitivity=0.8),
}
