"""A ``--fairness-history=DIR`` of runs (like pytest-benchmark's autosave), stored JSON run
reports read back, and the HTML report's history charts. Each run adds ``NNNN_<UTC
stamp>.json`` (reserved with ``O_EXCL``, filled by an atomic rename): its JSON report plus
an ``"entry"`` (commit, branch, date, machine, settings)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import re
import socket
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from pytest_recfair.compare.models import ModelComparison
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.gate import baselines
from pytest_recfair.report.fmt import esc, fmt_ci, nice_step, svg_open
from pytest_recfair.report.markdown import to_json
from pytest_recfair.report.sections import series
from pytest_recfair.report.status import FLAG_SNSR, Baselines
from pytest_recfair.results import AuditResult, Stat

_NAME = re.compile(r"^(\d{4,})_([0-9TZ]+)\.json$")
_STAMP = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class HistoryRun:
    """One stored run, as the history plot needs it."""

    number: int
    when: str  # "2026-01-02 03:04:05 UTC", or the name's stamp as written
    #: each test's headline numbers (``report.sections.series``) by (test id, label)
    values: Mapping[tuple[str, str], Stat]
    commit: str | None = None  # None: an entry written before they were recorded
    branch: str | None = None

    @property
    def day(self) -> str:
        """The date of the run (``2026-01-02``), or ``#N`` when its name has none."""
        return self.when[:10] if re.match(r"\d{4}-\d\d-\d\d", self.when) else f"#{self.number}"


def check_history_dir(directory: Path) -> None:
    """Fail before any prompt is sent when ``directory`` is a file or cannot be created."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(
            f"--fairness-history {str(directory)!r} is a file; give a directory that keeps "
            f"one JSON report per run, e.g. --fairness-history=.fairness-history."
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--fairness-history {str(directory)!r}: cannot create it "
            f"({exc.strerror or exc}); give a directory this process can write."
        ) from None


def history_runs(directory: Path) -> list[Path]:
    """The stored runs of ``directory`` in run order (other files are ignored)."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def _number(path: Path) -> int:
    return int(path.name.partition("_")[0])


def append_run(
    directory: Path,
    results: Sequence[AuditResult],
    baselines: Baselines = None,
    now: datetime | None = None,
    *,
    models: Sequence[ModelComparison] = (),
    settings: object = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Store the run's JSON report and ``"entry"`` as the next entry of ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    when = now or datetime.now(UTC)
    runs = history_runs(directory)
    number = _number(runs[-1]) + 1 if runs else 1
    while True:  # the next free name, created empty so no other run can take it
        path = directory / f"{number:04d}_{when.astimezone(UTC).strftime(_STAMP)}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            break
        except FileExistsError:
            number += 1
    info = {
        **git_info(cwd or Path.cwd(), env),
        "date": when.astimezone(UTC).isoformat(timespec="seconds"),
        "machine": {
            "hostname": socket.gethostname() or None,
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
        },
        "settings": {  # the run's settings that differ from the defaults
            f.name: getattr(settings, f.name)
            for f in (dataclasses.fields(settings) if dataclasses.is_dataclass(settings) else ())
            if getattr(settings, f.name) != f.default
        },
    }
    # the report's own lines stay as they are: the entry goes first in its object
    entry = json.dumps(info, sort_keys=True, ensure_ascii=False, default=str)
    text = '{\n"entry": ' + entry + ",\n" + to_json(results, baselines, models=models)[2:]
    try:
        atomic_write_text(path, text)
    except BaseException:
        path.unlink(missing_ok=True)  # never leave an empty entry behind
        raise
    return path


def entry_of(path: Path) -> dict[str, object]:
    """The ``"entry"`` of a stored run ({} if none); only its second line is parsed when
    :func:`append_run` wrote it there (a paper-scale entry is megabytes)."""
    try:
        with path.open(encoding="utf-8") as f:
            head = [f.readline(), f.readline()]
        if head[0] == "{\n" and head[1].startswith('"entry": '):
            entry = json.loads(head[1].removeprefix('"entry": ').rstrip().rstrip(","))
        else:
            doc = json.loads(path.read_text(encoding="utf-8"))
            entry = doc.get("entry") if isinstance(doc, dict) else None
    except (OSError, ValueError, RecursionError):
        return {}
    return entry if isinstance(entry, dict) else {}


def _text(entry: Mapping[str, object], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) and value else None


def find_entry(directory: Path, ref: str) -> Path:
    """The entry ``ref`` names: its number, ``latest``, ``-N`` or a commit prefix."""
    runs = [p for p in history_runs(directory) if p.stat().st_size > 0]
    where = f"--fairness-history {directory}"
    if not runs:
        raise DataError(
            f"{ref!r}: {where} holds no entry; run pytest --fairness "
            f"--fairness-history={directory} first."
        )
    text = ref.strip()
    if text.casefold() == "latest":
        return runs[-1]
    if re.fullmatch(r"-\d+", text):
        back = int(text)
        if -len(runs) <= back < 0:
            return runs[back]
        raise DataError(f"{ref!r}: {where} holds {len(runs)} entries; give -1 to -{len(runs)}.")
    found = [p for p in runs if text.isdigit() and _number(p) == int(text)][:1]
    if not found and re.fullmatch(r"[0-9a-fA-F]{4,40}", text):
        found = [p for p in runs if (_text(entry_of(p), "commit") or "").startswith(text.lower())]
    if found:
        return found[-1]  # the entry of that number, or the latest run of that commit
    numbers = ", ".join(p.name.split("_")[0].lstrip("0") for p in runs[-5:])
    raise DataError(
        f"{ref!r}: no such entry in {where}; give an entry number (the newest: {numbers}), "
        f"latest, -N (the Nth from the newest) or a commit prefix of 4+ hex digits."
    )


def load_history(directory: Path) -> list[HistoryRun]:
    """Every stored run, oldest first; an empty entry (still being written) is left out."""
    if not directory.is_dir():
        raise DataError(
            f"{directory} is not a directory; give the DIR a run wrote with --fairness-history=DIR."
        )
    out = []
    for path in history_runs(directory):
        if path.stat().st_size == 0:
            continue
        run = load_run(path)
        when = stamp = path.stem.partition("_")[2]
        with contextlib.suppress(ValueError):
            when = datetime.strptime(stamp, _STAMP).strftime("%Y-%m-%d %H:%M:%S UTC")
        values = {(r.meta.test_id, label): s for r in run.results for label, s in series(r)}
        commit, branch = _text(run.entry, "commit"), _text(run.entry, "branch")
        out.append(HistoryRun(_number(path), when, values, commit, branch))
    return out


#: (commit variable, branch variable) of the CI services, first found wins
CI_VARIABLES: tuple[tuple[str, str], ...] = (
    ("GITHUB_SHA", "GITHUB_REF_NAME"),  # GitHub Actions
    ("CI_COMMIT_SHA", "CI_COMMIT_REF_NAME"),  # GitLab CI
    ("CIRCLE_SHA1", "CIRCLE_BRANCH"),  # CircleCI
    ("BUILDKITE_COMMIT", "BUILDKITE_BRANCH"),  # Buildkite
    ("BITBUCKET_COMMIT", "BITBUCKET_BRANCH"),  # Bitbucket Pipelines
    ("GIT_COMMIT", "GIT_BRANCH"),  # Jenkins
)


def _git(args: list[str], cwd: Path) -> str | None:
    """One line of ``git ARGS`` in ``cwd``, or None (no git, not a repository, slow)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def git_info(cwd: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """``{"commit": ..., "branch": ...}``: the CI's variables, else git's; None if unknown."""
    env = os.environ if env is None else env
    commit = branch = None
    for sha_var, ref_var in CI_VARIABLES:
        if env.get(sha_var):
            commit, branch = env[sha_var], env.get(ref_var) or None
            break
    if commit is None:
        commit = _git(["rev-parse", "HEAD"], cwd)
    if branch is None and commit is not None:
        named = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
        branch = None if named in (None, "HEAD") else named  # detached: no branch
    return {"commit": commit, "branch": branch}


T = TypeVar("T")
_FORMAT: Final = "pytest-recfair report"
_HINT = "give a JSON report written by --fairness-report=run.json or --fairness-history=DIR"


@dataclass(frozen=True)
class StoredRun:
    """The results of one stored run, and the baselines they were compared against."""

    path: Path
    results: tuple[AuditResult, ...]
    baselines: Mapping[str, AuditResult]
    models: tuple[ModelComparison, ...] = ()  # the side-by-side section, when there is one
    entry: Mapping[str, Any] = field(default_factory=dict)  # {}: a plain report


def _result(doc: Any, path: Path, where: str) -> AuditResult:
    if not isinstance(doc, dict):
        raise DataError(f"{path}: {where} is not an audit result (a JSON object); {_HINT}.")
    # a result is a baseline plus its gate outcome: the baseline's checks hold for it
    found = baselines.first_problem({**doc, "schema_version": baselines.SCHEMA_VERSION})
    if found is not None:
        raise DataError(f"{path}: {where}{found[0][1:]} is invalid: {found[1]}; {_HINT}.")
    return _made(AuditResult.from_dict, doc, path, where)


def _made(make: Callable[[Any], T], doc: Any, path: Path, where: str) -> T:
    try:
        return make(doc)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise DataError(
            f"{path}: {where} is invalid ({type(exc).__name__}: {exc}); {_HINT}."
        ) from None


def parse_run(text: str, path: Path) -> StoredRun:
    """A stored run from the text of ``path`` (the path only names it in errors)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {_HINT}."
        ) from None
    except RecursionError:  # thousands of nested brackets: no report is shaped so
        raise DataError(f"{path} is JSON nested too deeply to be a run report; {_HINT}.") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise DataError(
            f'{path} is not a pytest-recfair run report (expected "format": "{_FORMAT}"); {_HINT}.'
        )
    if doc.get("version") != 1:
        raise DataError(
            f"{path} is a version {doc.get('version')!r} report (written by pytest-recfair "
            f"{doc.get('plugin_version', '?')}); this pytest-recfair reads version 1. "
            f"Use the pytest-recfair that wrote it, or re-run the audit."
        )
    if not isinstance(doc.get("results"), list):
        raise DataError(f'{path}: "results" must be a list of audit results; {_HINT}.')
    if not isinstance(doc.get("baselines", {}), dict):
        raise DataError(f'{path}: "baselines" must map test ids to results; {_HINT}.')
    results = tuple(_result(r, path, f"results[{i}]") for i, r in enumerate(doc["results"]))
    base = {
        str(k): _result(v, path, f"baselines[{json.dumps(k)}]")
        for k, v in (doc.get("baselines") or {}).items()
    }
    if not isinstance(doc.get("models") or [], list):
        raise DataError(f'{path}: "models" must be a list of model comparisons; {_HINT}.')
    models = tuple(  # several models audited by one test
        _made(ModelComparison.from_dict, m, path, f"models[{i}]")
        for i, m in enumerate(doc.get("models") or [])
    )
    entry = doc.get("entry")
    return StoredRun(path, results, base, models, entry if isinstance(entry, dict) else {})


def load_run(path: Path | str) -> StoredRun:
    """Read and check the JSON run report at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; {_HINT}.") from None
    except IsADirectoryError:
        raise DataError(f"{p} is a directory; {_HINT}.") from None
    except UnicodeDecodeError:
        raise DataError(f"{p} is not UTF-8 text; {_HINT}.") from None
    except OSError as exc:
        why = exc.strerror or exc
        raise DataError(f"cannot read {p} ({why}); check its permissions.") from None
    return parse_run(text, p)


_W, _H = 760, 210
# a date is ~60 px wide at 11 px: the right margin holds half of the last run's
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 40, 12, 60
_MAX_X_LABELS = 8


def _series(
    history: Sequence[HistoryRun], test_id: str, label: str
) -> list[tuple[int, HistoryRun, Stat]]:
    """(position, run, value) of every run where it is defined."""
    key = (test_id, label)
    return [
        (i, run, run.values[key])
        for i, run in enumerate(history)
        if key in run.values and math.isfinite(run.values[key].value)
    ]


def _axes(n: int, step: float, history: Sequence[HistoryRun], what: str) -> list[str]:
    x0, x1, y0, y1 = _LEFT, _W - _RIGHT, _H - _BOTTOM, _TOP
    same = Counter((run.day, run.commit) for run in history)
    out = []
    for i in range(5):
        y = y0 - (y0 - y1) * i / 4
        out.append(
            f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" fill="#59636e" '
            f'text-anchor="end">{step * i:.4g}</text>'
        )
    every = max(1, math.ceil(n / _MAX_X_LABELS))
    for i, run in enumerate(history):
        # every `every`-th run and the last, never one too close to the last to fit
        if (i % every == 0 and n - 1 - i >= every) or i == n - 1:
            lines = [run.commit[:7] if run.commit else None]
            lines.append(f"#{run.number}" if same[run.day, run.commit] > 1 else None)
            more = "".join(
                f'<tspan x="{_x(i, n):.1f}" dy="12">{esc(t)}</tspan>' for t in lines if t
            )
            out.append(
                f'<text class="xlabel" x="{_x(i, n):.1f}" y="{y0 + 14}" font-size="11" '
                f'fill="#59636e" text-anchor="middle">{esc(run.day)}{more}</text>'
            )
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{_H - 4}" font-size="11" fill="#59636e" '
        f'text-anchor="middle">stored run by date and commit (oldest first); {esc(what)}</text>'
    )
    return out


def _commit(run: HistoryRun) -> str:
    parts = [x for x in (run.commit[:12] if run.commit else None, run.branch) if x]
    return f", {' on '.join(parts)}" if parts else ""


def _x(i: int, n: int) -> float:
    x0, x1 = _LEFT, _W - _RIGHT
    return (x0 + x1) / 2 if n == 1 else x0 + (x1 - x0) * i / (n - 1)


def _chart(history: Sequence[HistoryRun], test_id: str, label: str, cid: str) -> str:
    points = _series(history, test_id, label)
    n = len(history)
    snsr = " · SNSR (" in label
    # the y axis top: a round number above every point, whisker and the flag
    hi = max(FLAG_SNSR if snsr else 0.0, 1e-3)
    for _, _, s in points:
        hi = max(hi, s.value, s.ci.high if s.ci and math.isfinite(s.ci.high) else 0.0)
    step = nice_step(hi * 1.1 / 4)
    top = step * 4
    what = label.rsplit(" · ", 1)[-1]

    def y(v: float) -> float:
        return _H - _BOTTOM - (_H - _BOTTOM - _TOP) * min(max(v, 0.0), top) / top

    out = [
        svg_open(cid, "history", _W, _H, f"{label} over {n} stored runs"),
        *_axes(n, step, history, f"{what}, lower is fairer"),
    ]
    if snsr:
        out.append(
            f'<line class="flag" x1="{_LEFT}" y1="{y(FLAG_SNSR):.1f}" x2="{_W - _RIGHT}" '
            f'y2="{y(FLAG_SNSR):.1f}" stroke="#bc4c00" stroke-dasharray="5 4">'
            f"<title>descriptive flag: SNSR {FLAG_SNSR:g}</title></line>"
        )
    for i, _, s in points:
        if s.ci is not None and math.isfinite(s.ci.low) and math.isfinite(s.ci.high):
            out.append(
                f'<line class="whisker" x1="{_x(i, n):.1f}" y1="{y(s.ci.low):.1f}" '
                f'x2="{_x(i, n):.1f}" y2="{y(s.ci.high):.1f}" stroke="#8c959f" '
                f'stroke-width="1.5"/>'
            )
    coords = " ".join(f"{_x(i, n):.1f},{y(s.value):.1f}" for i, _, s in points)
    out.append(
        f'<polyline class="snsr" points="{coords}" fill="none" stroke="#0969da" stroke-width="2"/>'
    )
    out += [
        f'<circle class="run" cx="{_x(i, n):.1f}" cy="{y(s.value):.1f}" r="4" fill="#0969da">'
        f"<title>#{run.number} ({esc(run.when)}{esc(_commit(run))}): {esc(what)} {esc(fmt_ci(s))}"
        "</title></circle>"
        for i, run, s in points
    ]
    return "".join([*out, "</svg>"])


def history_html(results: Sequence[AuditResult], history: Sequence[HistoryRun]) -> str:
    """One chart per test × headline number; "" without history."""
    if not history:
        return ""
    parts = [
        '<section class="test history" id="history"><header><h2>The history'
        f'</h2></header><p class="sub">{len(history)} stored runs (--fairness-history), '
        f"#{history[0].number} ({esc(history[0].when)}) to #{history[-1].number} "
        f"({esc(history[-1].when)}); whisker: 95% interval, dashed: the descriptive "
        f"flag SNSR {FLAG_SNSR:g}.</p>"
    ]
    for n, r in enumerate(results):
        for i, (label, _) in enumerate(series(r)):
            shown = len(_series(history, r.meta.test_id, label))
            parts.append(
                f'<h3>{esc(r.meta.test_id)} · {esc(label)} <small class="sub">'
                f"({shown} of {len(history)} runs)</small></h3>"
                f"<figure>{_chart(history, r.meta.test_id, label, f'history-{n}-{i}')}</figure>"
            )
    return "".join([*parts, "</section>"])
