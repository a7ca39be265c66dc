"""The settings' value parsers, (value, key, source) -> value or a ConfigError naming all
three; and the run's own options (``RunSettings``). Pure: stdlib only."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pytest_recfair.errors import ConfigError
from pytest_recfair.gate.limits import check_tolerance
from pytest_recfair.gate.unanswered import check_max_failed
from pytest_recfair.vocab import METRICS, STATISTICS

if TYPE_CHECKING:
    from pytest_recfair.settings import AuditSettings

Parser = Callable[[Any, str, str], Any]

#: Command-line option (dest) -> settings key, filled from the declarations by
#: :mod:`pytest_recfair.settings` (the parsers below them never import it back).
CLI_KEYS: dict[str, str] = {}


def nearest(name: str, known: Sequence[str]) -> str | None:
    """The known name a typo most likely meant (a swapped pair, "snrs", is one edit)."""
    from rapidfuzz import process  # only for a typo: keeps every run's start-up lean
    from rapidfuzz.distance import OSA

    near = process.extractOne(name, sorted(known), scorer=OSA.distance)
    return near[0] if near is not None and near[1] <= max(2, len(name) // 4) else None


def plain(value: Any, key: str, source: str) -> str:
    """The setting as the user wrote it: ``recfair_k = 'abc' (ini)``, ``--fairness-seed``."""
    if source == "ini":
        return f"recfair_{key}={value!r} (ini)"
    if source == "command-line":
        opt = next((d for d, k in CLI_KEYS.items() if k == key), None)
        if opt is not None:
            return f"--{opt.replace('_', '-')}={value!r} (command-line)"
    return f"{key}={value!r} ({source})"


def _numeric(cast: Callable[[str], Any], ok: Callable[[Any], bool], expected: str) -> Parser:
    """A number (given as a number or its text) that ``ok`` accepts, as ``cast`` makes it."""

    def parse(value: Any, key: str, source: str) -> Any:
        if isinstance(value, str):
            try:
                value = cast(value.strip())
            except ValueError:
                raise bad(key, value, source, expected) from None
        if isinstance(value, bool) or not ok(value):
            raise bad(key, value, source, expected)
        return cast(value)

    return parse


def whole(minimum: int) -> Parser:
    """An integer >= ``minimum``."""
    return _numeric(int, lambda x: isinstance(x, int) and x >= minimum, f"an integer >= {minimum}")


def number(lo: float, hi: float | None) -> Parser:
    """A number in [lo, hi] (no upper bound when ``hi`` is None), NaN refused."""
    expected = f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}"

    def ok(x: Any) -> bool:
        return isinstance(x, int | float) and lo <= x and (hi is None or x <= hi)  # NaN: False

    return _numeric(float, ok, expected)


unit, nonneg = number(0.0, 1.0), number(0.0, None)


def _parser(expected: str) -> Callable[[Callable[[Any], Any]], Parser]:
    """A parser from ``read(value)``: its None or error (a value of the wrong type too)
    becomes :func:`bad`'s one line, worded as every setting's is."""

    def wrap(read: Callable[[Any], Any]) -> Parser:
        def parse(value: Any, key: str, source: str) -> Any:
            try:
                out = read(value)
            except (AttributeError, ConfigError, TypeError, ValueError):
                out = None
            if out is None:
                raise bad(key, value, source, expected)
            return out

        return parse

    return wrap


_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(
    ("0", "false", "no", "off", ""), False
)


@_parser("true or false")
def to_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else _WORDS.get(value.strip().lower())


def choice(choices: tuple[str, ...]) -> Parser:
    @_parser("one of " + ", ".join(repr(c) for c in choices))
    def read(value: Any) -> str | None:
        return word if (word := value.strip().lower()) in choices else None

    return read


def listed(choices: tuple[str, ...]) -> Parser:
    """One name, "all", a comma-separated string or a list of names -> a tuple."""

    @_parser(f"one of {', '.join(repr(c) for c in choices)}, 'all', or a list of them")
    def read(value: Any) -> tuple[str, ...] | None:
        given = value if isinstance(value, list | tuple) and value else value.split(",")
        parts = [p.strip().lower() for p in given]
        parts = list(choices) if parts == ["all"] else parts
        ok = all(p in choices for p in parts) and len(set(parts)) == len(parts)
        return tuple(parts) if ok else None

    return read


metrics, statistics = listed(METRICS), listed(STATISTICS)


@_parser("'typo' (or 'typo:N', 'typo:kind+kind', 'typo:N:kind+kind')")
def perturbation(value: Any) -> str:
    """ "typo", or the longer spec "typo:N:kind+kind" that prompts.languages understands."""
    from pytest_recfair.prompts.languages import parse_perturbation

    parse_perturbation(value.strip())  # not a str: an AttributeError
    return str(value.strip().lower())


@_parser("a non-empty string")
def text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    return str(value) if isinstance(value, Path) else None


def paths(split: Callable[[str], list[str]]) -> Parser:
    """Several paths: a string cut by ``split`` (commas, or shell words), or a list."""

    @_parser("one or more paths")
    def read(value: Any) -> tuple[str, ...] | None:
        if isinstance(value, str | Path):
            parts = split(str(value))  # shlex: an unclosed quote is a ValueError
        elif isinstance(value, list | tuple) and all(isinstance(p, str | Path) for p in value):
            parts = [str(p) for p in value]
        else:
            return None
        return tuple(p.strip() for p in parts if p.strip()) or None

    return read


def optional(parse: Parser) -> Parser:
    def inner(value: Any, key: str, source: str) -> Any:
        # ini and CLI can only spell "not set" as text; a marker passes None
        text = source != "marker" and isinstance(value, str)
        unset = value is None or (text and value.strip().lower() in {"", "none"})
        return None if unset else parse(value, key, source)

    return inner


def bad(key: str, value: Any, source: str, expected: str) -> ConfigError:
    return ConfigError(
        f"fairness setting {plain(value, key, source)}: expected {expected}. "
        f"Fix the {source} value; see docs/configuration.md."
    )


@_parser('a count of quantile groups (>= 2) or ascending edges "10,100"')
def bins(value: Any) -> int | tuple[float, ...] | None:
    """N quantile groups (an integer >= 2), or ascending bin edges ("10,100" or a list)."""
    edges = isinstance(value, list | tuple)
    nums = [float(x) for x in (value if edges else str(value).split(","))]
    if not edges and len(nums) == 1:  # one number: a count of quantile groups
        ok = nums[0].is_integer() and nums[0] >= 2 and not isinstance(value, bool)
        return int(nums[0]) if ok else None
    return tuple(nums) if nums and nums == sorted(set(nums)) else None


#: A number here, checked by the gate's one rule (``gate.limits.check_tolerance``).
tolerance = _parser("a finite number >= 0.0, e.g. 0.02")(
    lambda value: check_tolerance(nonneg(value, "tolerance", ""))
)
max_failed = _parser("a share of prompts in [0, 1) such as 0.01 or '1%' (0: none)")(
    check_max_failed
)


class Prices(NamedTuple):
    """USD per million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float


_NUMBER = r"\s*(\d+(?:\.\d*)?|\.\d+)\s*"
_PRICES = re.compile(rf"^(?:input\s*=)?{_NUMBER}[,;/ ]\s*(?:output\s*=)?{_NUMBER}$", re.I)


def parse_prices(value: object, name: str = "recfair_prices") -> Prices | None:
    """``"0.15, 0.60"`` / ``"input=0.15 output=0.60"`` / ``(0.15, 0.6)``; blank -> None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    m = _PRICES.match(value) if isinstance(value, str) else None
    nums: Any = m.groups() if m else value if isinstance(value, list | tuple) else ()
    try:
        inp, out = map(float, nums)
    except (TypeError, ValueError):
        inp = out = -1.0
    if not (inp >= 0 and out >= 0 and math.isfinite(inp + out)):
        raise ConfigError(
            f"{name}: expected two prices in USD per million tokens, input then output, "
            f"e.g. '0.15, 0.60', got {value!r}; copy them from your provider's price list"
        )
    return Prices(inp, out)


#: Two prices (input, output; USD per million tokens) -> Prices.
prices = _parser("two prices, input then output, e.g. '0.15, 0.60'")(parse_prices)


#: (header, environment variable name) pairs, in the order given: how the settings
#: hold ``recfair_extra_headers`` (a tuple, so the frozen settings stay hashable).
HeaderEnvs = tuple[tuple[str, str], ...]
_HEADER: Final = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_ENV: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXPECTED: Final = (
    "'Header-Name: ENV_VAR_NAME' pairs separated by commas or new lines, the value being "
    "the NAME of an environment variable that holds the header's value"
)


def headers(value: Any, key: str, source: str) -> HeaderEnvs:
    """ "X-Team: TEAM_ENV" (or a dict) -> pairs: values name environment variables, so no
    header value is in a config."""
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, str):
        pairs = []
        for part in filter(str.strip, re.split(r"[,\n]", value)):
            name, sep, env = part.partition(":" if ":" in part else "=")
            if not sep:
                raise bad(key, value, source, f"{_EXPECTED}; {part.strip()!r} has no ':'")
            pairs.append((name.strip(), env.strip()))
    else:
        raise bad(key, value, source, _EXPECTED)
    out: dict[str, str] = {}
    for name, env in pairs:
        if not _HEADER.match(name) or not _ENV.match(env):
            raise bad(key, value, source, f"{_EXPECTED}; got {name!r}: {env!r}")
        out[name] = env
    return tuple(out.items())


# --- the run's own options, resolved once at configure time: pure data, nothing here reads a
# file (the plugin's session set-up loads the compare reference and checks the paths)

_SHARD_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` (1-based) of ``count`` (``--fairness-shard=I/N``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, *, source: str = "--fairness-shard") -> Shard:
    """``"2/4"`` -> Shard(2, 4), with a one-line error naming ``source`` otherwise."""
    match = _SHARD_RE.fullmatch(str(text))
    index, count = map(int, match.groups()) if match else (0, 0)
    if not 1 <= index <= count:
        raise ConfigError(
            f"{source}: expected I/N with 1 <= I <= N (shards are numbered from 1: e.g. 2/4 "
            f"for the second of four CI jobs), got {text!r}."
        )
    return Shard(index, count)


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What a whole pytest run does beside its audits, resolved once at configure time."""

    shard: Shard | None = None  # --fairness-shard=I/N
    merge: tuple[Path, ...] = ()  # --fairness-merge: shard results to gate
    prune: bool = False  # --fairness-prune
    prune_dry_run: bool = False  # --fairness-prune-dry-run: list only
    history: str | None = None  # --fairness-history as given (the notes name it)
    history_dir: Path | None = None  # ... resolved against the invocation directory
    reports: tuple[Path, ...] = ()  # --fairness-report, else ini recfair_report
    compare: str | None = None  # --fairness-compare=REF (the plugin loads it)
    compare_fail: str | None = None  # --fairness-compare-fail=EXPR

    @property
    def html(self) -> bool:
        """Whether an HTML report is written (it plots the history)."""
        return any(p.suffix.lower() == ".html" for p in self.reports)


def resolve_run(
    cli: Mapping[str, Any], run: AuditSettings, *, cwd: Path, rootdir: Path
) -> RunSettings:
    """The run's options; command-line paths relative to ``cwd``, ini ones to ``rootdir``."""
    shard, merge = cli.get("fairness_shard"), cli.get("fairness_merge") or ()
    if shard and merge:
        raise ConfigError(
            "--fairness-shard and --fairness-merge: give one; the shard jobs audit with "
            "--fairness-shard=I/N, then one job gates their results with --fairness-merge."
        )
    # the command line replaces the ini list
    reports = [cwd / p for p in cli.get("fairness_report") or ()]
    history = cli.get("fairness_history") or None
    return RunSettings(
        shard=parse_shard(shard) if shard else None,
        merge=tuple(cwd / p for p in merge),
        prune=bool(cli.get("fairness_prune")),
        prune_dry_run=bool(cli.get("fairness_prune_dry_run")),
        history=history,
        history_dir=None if history is None else cwd / history,
        reports=tuple(dict.fromkeys(reports or [rootdir / p for p in run.report or ()])),
        compare=cli.get("fairness_compare") or None,
        compare_fail=cli.get("fairness_compare_fail") or None,
    )
