"""The whole-audit replay cache (engine/replaymemo.py) on the bundled demo, every kind
of audit (list overlap, item side, exposure, candidate position, role play with its judge):
real ``pytest --fairness`` runs in subprocesses, each a new process as in CI.

A first run (empty cache) sends every prompt through the replay and keeps each audit;
the next run serves all ten audits from the cache without sending a prompt, with the
numbers of a run without any cache; a changed cassette is never served stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin import run_demo_counted

ROOT = Path(__file__).resolve().parents[2]

COUNTER = """
import json, os
from pytest_recfair.engine import replaymemo, stream

HITS, SENT = [], []
_served, _send = replaymemo.served, stream.send


def served(key, request, kind, rebuild):
    got = _served(key, request, kind, rebuild)
    if got is not None:
        HITS.append(request.test_id)
    return got


def send(request, cases):
    SENT.append(request.test_id)
    return _send(request, cases)


replaymemo.served, stream.send = served, send


def pytest_sessionfinish(session):
    with open(os.environ["RECFAIR_TEST_COUNTS"], "w") as fh:
        json.dump({"hits": sorted(set(HITS)), "sent": sorted(set(SENT))}, fh)
"""


def _run(pytester: pytest.Pytester, name: str, **env: str) -> tuple[Any, dict[str, Any]]:
    report, counts = pytester.path / f"{name}.json", pytester.path / f"{name}-counts.json"
    run_demo_counted(pytester, report, RECFAIR_TEST_COUNTS=str(counts), **env)
    return json.loads(report.read_text(encoding="utf-8"))["results"], json.loads(
        counts.read_text(encoding="utf-8")
    )


def _change_one_reply(cassettes: Path) -> Path:
    """Rewrite the first title of the first reply of one cassette: a re-recording."""
    path = sorted(cassettes.glob("*.json"))[0]
    doc = json.loads(path.read_text(encoding="utf-8"))
    for item in doc["interactions"]:
        body = json.loads(item["response"]["body"]["string"])
        content = body["choices"][0]["message"]["content"]
        first = content.splitlines()[0]
        if first.startswith("1. "):
            lines = content.splitlines()
            lines[0] = "1. A Film Nobody Made"
            body["choices"][0]["message"]["content"] = "\n".join(lines)
            item["response"]["body"]["string"] = json.dumps(body)
            break
    else:
        raise AssertionError(f"{path}: no numbered reply to change")
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_every_kind_is_served_whole_from_the_second_run_and_never_stale(
    pytester: pytest.Pytester,
) -> None:
    for folder in ("audits", "fixtures", "baselines"):
        shutil.copytree(ROOT / folder, pytester.path / folder)
    shutil.copy(ROOT / "pyproject.toml", pytester.path / "pyproject.toml")
    (pytester.path / "recfair_counter.py").write_text(COUNTER)
    cassettes = pytester.path / "fixtures" / "cassettes"
    cache = cassettes / ".recfair_cache"
    shutil.rmtree(cache, ignore_errors=True)

    plain, plain_counts = _run(pytester, "plain", RECFAIR_CACHE="off")
    first, first_counts = _run(pytester, "first")
    warm, warm_counts = _run(pytester, "warm")
    audits = plain_counts["sent"]
    assert len(audits) == 10, audits  # all ten audits send their prompts to the replay
    assert plain_counts["hits"] == first_counts["hits"] == []
    assert first_counts["sent"] == audits
    assert warm_counts == {"hits": audits, "sent": []}  # all served, none sent
    assert plain
    assert first == plain
    assert warm == plain

    _change_one_reply(cassettes)
    changed, changed_counts = _run(pytester, "changed")
    reference, _ = _run(pytester, "reference", RECFAIR_CACHE="off")
    assert changed == reference  # the changed cassette's audits replayed afresh
    assert changed != plain
    assert changed_counts["sent"], "a changed cassette was served from the cache"
    assert set(changed_counts["hits"]) | set(changed_counts["sent"]) == set(audits)
