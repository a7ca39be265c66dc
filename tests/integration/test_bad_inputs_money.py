"""issue 22, point 5: bad inputs to the newer surfaces (shard files, merges, batch
journals, the report and compare CLI) each give one clear line naming the file or
argument, what was expected and what to do; never a traceback, never silent acceptance.

The shard cases run the real plugin: two shard runs, then the file (or the test) is
changed and a merge run must refuse in one line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_recfair.__main__ import main
from pytest_recfair.engine import base, sharding
from pytest_recfair.errors import DataError
from tests.support.plugin import make_project, plugin_args

pytest_plugins = ["pytester"]

TEST = """
from pytest_recfair import fairness


@fairness(attr="religion"{extra})
def test_religion():
    pass
"""

Doc = dict[str, Any]


def _edit(fn: Callable[[Doc], None]) -> Callable[[list[Path]], None]:
    def apply(files: list[Path]) -> None:
        doc = json.loads(files[0].read_text())
        fn(doc)
        files[0].write_text(json.dumps(doc))

    return apply


def _strings(doc: Doc) -> None:
    """Every list in the first attribute's tally turned into a string."""
    attribute = next(iter(doc["tally"]["attributes"].values()))
    for name, value in attribute.items():
        if isinstance(value, list):
            attribute[name] = "oops"


def _sims(doc: Doc) -> None:
    """The first attribute's similarities a string (issue 33: AttributeError)."""
    next(iter(doc["tally"]["attributes"].values()))["sims"] = "oops"


def _failure_field(doc: Doc) -> None:
    doc["failures"] = {"cases": 10, "failed": [{"bogus_field": 1}]}


def _row(doc: Doc) -> None:
    doc["tally"]["rows"][0] = -1


def _model(doc: Doc) -> None:
    doc["meta"]["model"] = "another-model"


def _empty(files: list[Path]) -> None:
    files[1].write_text("")


def _garbage(files: list[Path]) -> None:
    files[1].write_text("\x00\x01 not json at all")


def _reindent(files: list[Path]) -> None:
    doc = json.loads(files[1].read_text())
    body = json.dumps({"a": 1, **doc}, indent=8)  # "format" far from the start
    files[1].write_text(body)


# (case, change to the shard files, marker arguments of the merge run, expected text)
SHARD_CASES: list[tuple[str, Callable[[list[Path]], None], str, str]] = [
    ("field types", _edit(_strings), "", "invalid at $.tally.attributes.religion"),
    ("similarities a string", _edit(_sims), "", "sims: 'oops' is not of type 'object'"),
    ("unknown failure field", _edit(_failure_field), "", "invalid at $.failures.failed[0]"),
    ("row index -1", _edit(_row), "", "rows: -1 is less than the minimum of 0"),
    ("two models", _edit(_model), "", "audited different models"),
    ("marker k now differs", lambda f: None, ", k=6", "k 6 here, 5 in the shards"),
    ("marker attr now differs", lambda f: None, "|gender", "now audits attr='gender'"),
    ("empty shard file", _empty, "", "(empty)"),
    ("garbage shard file", _garbage, "", "(not JSON)"),
]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


def test_bad_shard_inputs_are_one_clear_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, TEST.format(extra=", k=5"))
    for i in (1, 2):
        _run(pytester, "--fairness", f"--fairness-shard={i}/2").assert_outcomes(skipped=1)
    shard_dir = pytester.path / "fairness-shards"
    pristine = pytester.path / "pristine"
    shutil.copytree(shard_dir, pristine)
    unclear = []
    for name, change, marker, expected in SHARD_CASES:
        shutil.rmtree(shard_dir)
        shutil.copytree(pristine, shard_dir)
        files = sorted(shard_dir.rglob("*.json"))
        change(files)
        if marker.startswith("|"):
            source = TEST.format(extra=", k=5").replace("religion", marker[1:])
            source = source.replace("def test_" + marker[1:], "def test_religion")
        else:
            source = TEST.format(extra=marker or ", k=5")
        pytester.makepyfile(test_audit=source)
        out = _run(pytester, "--fairness", f"--fairness-merge={shard_dir}").stdout.str()
        lines = [ln for ln in out.splitlines() if expected in ln]
        if "Traceback" in out or not lines or ".shard-" not in lines[0]:  # names the file
            unclear.append((name, out[-1500:]))
    assert unclear == []


def test_a_reindented_shard_file_still_merges(pytester: pytest.Pytester) -> None:
    make_project(pytester, TEST.format(extra=""))
    for i in (1, 2):
        _run(pytester, "--fairness", f"--fairness-shard={i}/2").assert_outcomes(skipped=1)
    _run(pytester, "--fairness", "--fairness-update").assert_outcomes(passed=1)
    _reindent(sorted((pytester.path / "fairness-shards").rglob("*.json")))
    merged = _run(pytester, "--fairness", "--fairness-merge=fairness-shards")
    merged.assert_outcomes(passed=1)


def _journal(tmp_path: Path, entry: object) -> Path:
    root = tmp_path / "journals"
    root.mkdir()
    owner = {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    (root / "rfbad.json").write_text(json.dumps({"version": 2, "owner": owner, "batches": [entry]}))
    return root


def _entry(**change: object) -> dict[str, object]:
    entry: dict[str, object] = {"key": "rfbad", "state": "submitted", "lines": {}}
    entry.update(change)
    return entry


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    return err


def test_compare_deeply_nested_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    err = _cli(["compare", str(deep), str(deep)], capsys)
    assert "deep.json is JSON nested too deeply" in err


def test_report_output_must_match_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _cli(["report", str(tmp_path / "run.json"), "--to", "html", "-o", "x.pdf"], capsys)
    assert "-o x.pdf: --to html writes .html files" in err
    assert not Path("x.pdf").exists()


def test_a_reply_without_text_names_the_case(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    doc = {
        "format": base.SHARD_FORMAT,
        "version": 1,
        "test_id": "t",
        "shard": {"index": 1, "count": 2},
        "meta": {},
        "replies": {"completions": {"case-7": {"finish_reason": "stop"}}, "errors": {}},
    }
    path.write_text(json.dumps(doc))
    with pytest.raises(
        DataError, match=r"invalid at \$\.replies\.completions\.case-7: 'text' is a required"
    ) as info:
        sharding.load_shard(path)
    assert str(path) in str(info.value)
