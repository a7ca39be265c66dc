"""Bias profiles (per value, the fraction of the K-list shifted from the neutral one; extra
shifts per language and for misspelt values), fault plans (HTTP faults: the server's;
refusals and short lists: the recommender's) and per-entity heterogeneity of noise and
shift (real models are not equally stable nor biased for every entity)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import load_structured
from pytest_recfair.sim.planted import ItemPlan, PositionPlan, RolePlan, fraction, unit
from pytest_recfair.sim.recognise import Recognised, ValueMatch


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

    @classmethod
    def parse(cls, spec: Heterogeneity | Mapping[str, object] | str | None) -> Heterogeneity:
        """From a PROFILES name, ``"stability=0.8,sensitivity=0.5"``, a mapping or None."""
        if spec is None or isinstance(spec, Heterogeneity):
            return spec or cls()
        if isinstance(spec, str) and spec in PROFILES:
            return PROFILES[spec]
        if isinstance(spec, str):
            items = [p.strip().partition("=") for p in spec.split(",") if p.strip()]
            if bad := [key for key, sep, _ in items if not sep]:
                raise ConfigError(
                    f"heterogeneity: {bad[0]!r} is not a profile ({', '.join(sorted(PROFILES))})"
                    " nor a 'stability=S,sensitivity=H' item."
                )
            # a number where it reads as one: the check names anything else as given
            numeric = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")
            spec = {k.strip(): float(v) if numeric.fullmatch(v) else v for k, _, v in items}
        if not isinstance(spec, Mapping) or not set(spec) <= {"stability", "sensitivity"}:
            raise ConfigError(
                f"heterogeneity: expected one of {sorted(PROFILES)}, 'stability=S,sensitivity=H' "
                f"or a mapping with those keys; got {spec!r}."
            )
        return cls(**{str(k): v for k, v in spec.items()})  # type: ignore[arg-type]

    def factor(self, which: str, seed: int, domain: str, entity: str) -> float:
        spread: float = getattr(self, which)
        if not spread:
            return 1.0  # exactly: the uniform profile keeps the original arithmetic
        return 1.0 + spread * (2.0 * unit(seed, which, domain, entity) - 1.0)


#: ``uniform``: every entity alike (the original simulator); ``realistic``: 0.2..1.8.
PROFILES: dict[str, Heterogeneity] = {
    "uniform": Heterogeneity(),
    "realistic": Heterogeneity(stability=0.8, sensitivity=0.8),
}

_CROSS = re.compile(r"\s+[x×]\s+|\s*\+\s*")


@dataclass(frozen=True)
class ValueTable:
    """Rates per (attribute, value label), both case-folded; attribute ``None`` = any."""

    entries: tuple[tuple[str | None, str, float], ...] = ()

    @classmethod
    def parse(cls, data: object, where: str, source: str) -> ValueTable:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise DataError(
                f"{source}: {where} must map attribute -> {{value: rate}} or value -> rate, "
                f"got {type(data).__name__} {data!r}."
            )
        entries: list[tuple[str | None, str, float]] = []
        for key, inner in data.items():
            if not isinstance(inner, Mapping):
                entries.append((None, str(key), fraction(inner, f"{where}.{key}", source)))
                continue
            for value, rate in inner.items():
                rate = fraction(rate, f"{where}.{key}.{value}", source)
                entries.append((str(key).casefold(), str(value), rate))
        return cls(tuple((a, v.casefold(), r) for a, v, r in entries))

    def _one(self, v: ValueMatch) -> float:
        names = {v.label.casefold(), v.found.casefold(), *(a.casefold() for a in v.aliases)}
        hits = [(a, r) for a, val, r in self.entries if val in names]
        precise = [r for a, r in hits if a is None or a in v.attributes]
        # an attribute the vocabulary does not know ("nationality") still counts by label
        pool = precise or [r for _, r in hits]
        return max(pool, default=0.0)

    def rate(self, rec: Recognised, *, neutral_key: str = "neutral") -> float:
        """``*`` applies to every prompt, ``neutral`` to neutral ones; a crossed value its
        joined label if listed, else the sum of its parts' (capped at 1)."""
        star = max((r for _, val, r in self.entries if val == "*"), default=0.0)
        if rec.neutral:
            return max((r for _, val, r in self.entries if val in ("*", neutral_key)), default=0.0)
        if len(rec.values) > 1:
            parts = frozenset(label.casefold() for label in rec.labels)
            combo = [r for _, val, r in self.entries if frozenset(_CROSS.split(val)) == parts]
            if combo:
                return max(star, *combo)
        return max(star, min(1.0, sum(self._one(v) for v in rec.values)))


@dataclass(frozen=True)
class BiasProfile:
    bias: ValueTable = field(default_factory=ValueTable)
    languages: Mapping[str, float] = field(default_factory=dict)
    typo: float = 0.0
    refusals: ValueTable = field(default_factory=ValueTable)
    short_lists: ValueTable = field(default_factory=ValueTable)
    faults: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    items: ItemPlan | None = None  # planted item-side bias (sim.planted)
    positions: PositionPlan | None = None  # planted candidate-position bias
    heterogeneity: Heterogeneity = field(default_factory=Heterogeneity)  # per-entity spread
    roleplay: RolePlan = field(default_factory=RolePlan)  # role-play answers (sim.planted)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], source: str = "bias profile", base: Path | None = None
    ) -> BiasProfile:
        if not isinstance(data, Mapping):
            raise DataError(
                f"{source}: expected a mapping such as {{religion: {{Muslim: 0.35}}}}, "
                f"got {type(data).__name__}."
            )
        if not _PROFILE_SECTIONS.intersection(data):
            data = {"bias": data}  # the short form: the whole mapping is the bias table
        unknown = set(data) - _PROFILE_SECTIONS
        if unknown:
            raise DataError(
                f"{source}: unknown section(s) {sorted(map(str, unknown))}; allowed: "
                f"{sorted(_PROFILE_SECTIONS)}. Put attribute tables under 'bias:'."
            )
        languages = data.get("languages") or {}
        if not isinstance(languages, Mapping):
            raise DataError(f"{source}: 'languages' must map language -> rate, got {languages!r}.")
        faults = data.get("faults") or {}
        if not isinstance(faults, Mapping):
            raise DataError(f"{source}: 'faults' must be a mapping, got {faults!r}.")
        try:
            spread = Heterogeneity.parse(data.get("heterogeneity"))
        except ConfigError as exc:
            raise DataError(f"{source}: {exc}") from None
        return cls(
            bias=ValueTable.parse(data.get("bias"), "bias", source),
            languages={
                str(k).casefold(): fraction(v, f"languages.{k}", source)
                for k, v in languages.items()
            },
            typo=fraction(data.get("typo", 0.0), "typo", source),
            refusals=ValueTable.parse(data.get("refusals"), "refusals", source),
            short_lists=ValueTable.parse(data.get("short_lists"), "short_lists", source),
            faults=dict(faults),
            name=str(data.get("name", "")),
            items=ItemPlan.parse(data["items"], source, base) if data.get("items") else None,
            positions=(
                PositionPlan.parse(data["positions"], source) if data.get("positions") else None
            ),
            heterogeneity=spread,
            roleplay=RolePlan.parse(data.get("roleplay")),
        )

    def shift(self, rec: Recognised) -> float:
        if rec.neutral:
            return 0.0
        typo = self.typo if rec.typo else 0.0
        return min(1.0, self.bias.rate(rec) + self.languages.get(rec.language, 0.0) + typo)


_PROFILE_SECTIONS = frozenset(f.name for f in fields(BiasProfile)) | {"description"}


def load_profile(source: BiasProfile | Mapping[str, Any] | str | Path | None) -> BiasProfile:
    """A profile from a mapping, a YAML path, or a bundled name (``"demo"``); None = fair."""
    if source is None or isinstance(source, BiasProfile):
        return source or BiasProfile()
    if isinstance(source, Mapping):
        return BiasProfile.from_mapping(source)
    path = Path(source)
    if not path.suffix and not path.exists():
        folder = resources.files("pytest_recfair.sim") / "profiles"
        bundled = folder / f"{source}.yaml"
        if not bundled.is_file():
            names = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))
            raise ConfigError(
                f"bias profile {str(source)!r} is neither a file nor a bundled profile "
                f"(bundled: {names}); pass a YAML path or one of those names."
            )
        text, where = bundled.read_text(encoding="utf-8"), f"bundled profile {source!r}"
    else:
        try:
            text, where = path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise ConfigError(
                f"bias profile {str(path)!r} cannot be read ({exc.strerror}); "
                "check the path passed as bias=/--bias."
            ) from exc
    base = None if where.startswith("bundled") else path.parent
    return BiasProfile.from_mapping(load_structured(text, where) or {}, source=where, base=base)


# Other spellings of the fields of Faults ("-" reads as "_" after this lookup).
_FAULT_ALIASES = dict.fromkeys(("429", "rate_limit", "rate-limit"), "rate_429")
_FAULT_ALIASES |= dict.fromkeys(("500", "error", "errors"), "rate_500")
_FAULT_ALIASES |= {"timeout": "rate_timeout", "timeouts": "rate_timeout", "hang": "hang_s"}
_FAULT_ALIASES |= {"malformed": "rate_malformed", "mode": "timeout_mode", "refusal": "refusals"}
_FAULT_ALIASES |= dict.fromkeys(("short", "short-lists"), "short_lists")


@dataclass(frozen=True)
class Faults:
    """Seeded rates per HTTP request (per prompt: refusals and short lists)."""

    rate_429: float = 0.0
    retry_after: float = 1.0  # seconds, sent as Retry-After (rounded up) and retry-after-ms
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    timeout_mode: Literal["hang", "close"] = "hang"
    hang_s: float = 300.0  # a hang ends earlier when the server stops
    rate_malformed: float = 0.0
    # then the body is answered, so a retrying client completes (None: no limit)
    max_per_request: int | None = 3
    refusals: ValueTable = field(default_factory=ValueTable)
    short_lists: ValueTable = field(default_factory=ValueTable)

    @property
    def http_rate(self) -> float:
        return self.rate_429 + self.rate_500 + self.rate_timeout + self.rate_malformed

    @classmethod
    def parse(cls, spec: Faults | Mapping[str, Any] | str | Path | Sequence[str] | None) -> Faults:
        """From a mapping, a YAML file, or ``"429=0.1,refusals.Muslim=0.2"`` items."""
        if spec is None or isinstance(spec, Faults):
            return spec or cls()
        if isinstance(spec, Mapping):
            return cls._from_mapping(spec, "faults")
        items = [str(spec)] if isinstance(spec, str | Path) else [str(s) for s in spec]
        data: dict[str, Any] = {}
        for text in items:
            if text.endswith((".yaml", ".yml")) or (Path(text).is_file() and "=" not in text):
                try:
                    loaded = yaml.safe_load(Path(text).read_text(encoding="utf-8")) or {}
                except (OSError, yaml.YAMLError) as exc:
                    raise ConfigError(f"faults file {text!r} cannot be read: {exc}") from exc
                if not isinstance(loaded, Mapping):
                    raise ConfigError(f"faults file {text!r} must hold a mapping.")
                data.update(loaded)
                continue
            for part in filter(None, (p.strip() for p in text.split(","))):
                key, sep, value = part.partition("=")
                if not sep:
                    raise ConfigError(
                        f"faults: expected key=value items such as '429=0.1,500=0.05', got "
                        f"{part!r}. Keys: 429, 500, timeout, malformed, retry_after, hang_s, "
                        "timeout_mode, max_per_request, refusals.<value>, short_lists.<value>."
                    )
                head, dot, sub = key.strip().partition(".")
                name = _FAULT_ALIASES.get(head, head)
                if dot and name in ("refusals", "short_lists"):
                    data.setdefault(name, {})[sub] = yaml.safe_load(value)
                else:
                    data[name] = value.strip()
        return cls._from_mapping(data, "faults")

    @classmethod
    def _from_mapping(cls, data: Mapping[str, Any], source: str) -> Faults:
        allowed = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for raw, value in data.items():
            key = _FAULT_ALIASES.get(str(raw), str(raw)).replace("-", "_")
            if key not in allowed:
                raise ConfigError(
                    f"{source}: unknown fault {raw!r}; allowed: {sorted(allowed)} "
                    "(aliases 429, 500, timeout, malformed)."
                )
            if key in ("refusals", "short_lists"):
                kwargs[key] = ValueTable.parse(value, key, source)
            elif key == "timeout_mode":
                if value not in ("hang", "close"):
                    raise ConfigError(
                        f"{source}: timeout_mode must be 'hang' or 'close', got {value!r}."
                    )
                kwargs[key] = value
            elif key == "max_per_request":
                kwargs[key] = None if value in (None, "none", "None") else int(value)
            else:
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    raise ConfigError(f"{source}: {key} must be a number, got {value!r}.") from None
                if key.startswith("rate_"):
                    number = fraction(number, key, source)
                elif not math.isfinite(number) or number < 0:
                    raise ConfigError(f"{source}: {key} must be >= 0 seconds, got {value!r}.")
                kwargs[key] = number
        faults = cls(**kwargs)
        if faults.http_rate > 1:
            raise ConfigError(
                f"{source}: 429 + 500 + timeout + malformed rates add up to "
                f"{faults.http_rate:.2f} > 1; lower them."
            )
        return faults

    def merged(self, profile: BiasProfile) -> Faults:
        """These faults plus the profile's ``faults:`` section, refusals and short lists."""
        base = self
        if profile.faults:  # explicit settings win over the profile's defaults
            default = Faults()
            explicit = {k: v for k, v in vars(self).items() if v != getattr(default, k)}
            base = replace(Faults._from_mapping(profile.faults, "bias profile faults"), **explicit)
        return replace(
            base,
            refusals=ValueTable(base.refusals.entries + profile.refusals.entries),
            short_lists=ValueTable(base.short_lists.entries + profile.short_lists.entries),
        )
