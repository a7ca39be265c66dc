"""The HTML report renders in headless Chromium, with its SVG charts in the live DOM.

Chromium runs with every host name unresolvable, so the page must render from the file
alone. Without Chromium the tests skip, except on CI (CI=true), where they fail.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pytest_recfair.gate import thresholds as gate
from pytest_recfair.report.fmt import fmt, p_cell
from pytest_recfair.report.registry import write_report
from pytest_recfair.results import AuditResult
from tests.support import synth_results
from tests.support.reports import render_reports

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        reason = "Chromium is not installed (looked for chromium, chromium-browser on PATH)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must install it (apt-get install chromium).")
        pytest.skip(f"{reason}; install it to check the HTML report renders.")
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[AuditResult]]:
    synth = synth_results
    baseline = synth.audit(seed=0, gender=True)
    regressed = synth.audit(seed=7, gender=True, bias={"Islamic": -0.12}, model="sim-v2")
    steady = synth.audit(seed=1, gender=True, test_id="tests/test_audit.py::test_steady")
    results = [
        replace(r, gate=gate.evaluate(r, baseline, gate.Thresholds(), tolerance=0.02))
        for r in (regressed, steady)
    ]
    path = tmp_path_factory.mktemp("html") / "fairness.html"
    write_report(path, results, {r.meta.test_id: baseline for r in results})
    return path, results


def _run(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _png_pixels(png: bytes) -> tuple[int, int, bytes]:
    """Width, height and the inflated scanlines of a PNG (enough to see it is not blank)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    pos, idat = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_screenshot_renders(page: tuple[Path, list[AuditResult]], tmp_path: Path) -> None:
    chromium = _chromium()
    path, _ = page
    shot = tmp_path / "report.png"
    done = _run(
        chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", path.as_uri()
    )
    assert shot.is_file(), f"no screenshot; chromium said:\n{done.stderr[-2000:]}"
    width, height, raw = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    # a blank page inflates to a handful of byte values; charts, text and badges to many
    assert len(set(raw)) > 64


def test_dom_holds_the_svg_charts(page: tuple[Path, list[AuditResult]], tmp_path: Path) -> None:
    chromium = _chromium()
    path, results = page
    done = _run(chromium, tmp_path, "--dump-dom", path.as_uri())
    dom = done.stdout
    assert "<svg" in dom, f"no DOM dumped; chromium said:\n{done.stderr[-2000:]}"
    n_attributes = sum(len(r.attributes) for r in results)
    n_values = sum(len(a.values) for r in results for a in r.attributes)
    assert len(re.findall(r'<svg[^>]*class="chart dots"', dom)) == n_attributes
    assert len(re.findall(r'<svg[^>]*class="chart heatmap"', dom)) == len(results)
    assert len(re.findall(r'<circle class="mean"', dom)) == n_values
    assert len(re.findall(r'class="baseline-marker"', dom)) == n_values
    assert len(re.findall(r'<g class="cell">', dom)) == n_values
    assert dom.count('class="badge FAIL"') >= 1
    assert dom.count('class="badge PASS"') >= 1
    for r in results:
        assert r.meta.test_id in dom


# --- the item-side and candidate-position demo audits, in every format ------------------

ROOT = Path(__file__).resolve().parents[2]


def _demo_run(out: Path, test_file: str) -> dict[str, Any]:
    """One run of a demo audit file: its JSON report and JUnit XML in ``out``, and the
    HTML and Markdown reports of the same results rendered from the JSON."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-v", test_file, f"--fairness-report={out / 'r.json'}",
         f"--junitxml={out / 'junit.xml'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    results = render_reports(out, ROOT)
    return {"dir": out, "results": results, "terminal": run.stdout}


@pytest.fixture(scope="module")
def kinds_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the demo's item-side and position audits (audits/test_kinds.py)."""
    return _demo_run(tmp_path_factory.mktemp("kinds"), "audits/test_kinds.py")


def _extras(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = [a for r in run["results"] for a in r.get(kind, {}).get("attributes", [])]
    assert found, f"the demo run has no {kind} results"
    return found


def _item_numbers(run: dict[str, Any]) -> list[str]:
    """Every number the item-side results hold, as the reports print them."""
    out = []
    for res in _extras(run, "items"):
        cov = res["coverage"]
        out.append(f"{cov['matched'] / cov['total']:.0%} of {cov['total']} titles")
        for f in res["fields"]:
            out += [fmt(f["max_shift"]), *(fmt(x) for x in f["shift"])]
            out += [fmt(x) for row in f["shares"] for x in row]
            out += [fmt(lo) for lo, _ in f["shift_ci"]]
            out += [p_cell(p) for p in f["p_adjusted"]]
    return out


def _position_numbers(run: dict[str, Any]) -> list[str]:
    """Every number the candidate-position results hold, as the reports print them."""
    out = []
    for res in _extras(run, "positions"):
        out += [fmt(res["pooled_bias"]), p_cell(res["p_uniform"])]
        out += [fmt(x) for x in res["pooled_bias_ci"]]
        out += [fmt(row[0]) for row in res["curve"]]
        out += [fmt(x) for values in res["measures"].values() for x in values]
        out += [p_cell(p) for ps in res["p_adjusted"].values() for p in ps]
        out += [str(n) for n in res["n_picks"]]
    return out


def _text(html_text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", html_text))


def test_html_shows_the_item_side_and_position_numbers(
    kinds_run: dict[str, Any], tmp_path: Path
) -> None:
    """The rendered page (Chromium's DOM) shows each kind's numbers, not an empty SNSR
    table, an empty heatmap or a list-overlap metric (the bug of issue 19)."""
    chromium = _chromium()
    done = _run(chromium, tmp_path, "--dump-dom", (kinds_run["dir"] / "r.html").as_uri())
    dom = done.stdout
    assert "Fairness report" in dom, f"no DOM dumped; chromium said:\n{done.stderr[-2000:]}"
    text = _text(dom)
    missing = [n for n in _item_numbers(kinds_run) + _position_numbers(kinds_run) if n not in text]
    assert not missing, f"not on the page: {missing}"
    assert "Item side: first name" in text
    assert "Candidate position: religion" in text
    assert "SNSR [95% CI]" not in text
    assert 'class="chart heatmap"' not in dom
    assert "jaccard@" not in text
    assert "item side, top 10" in text
    assert "candidate position (one pick of 6)" in text


def test_markdown_terminal_and_junit_show_them_too(kinds_run: dict[str, Any]) -> None:
    md = (kinds_run["dir"] / "r.md").read_text(encoding="utf-8")
    terminal = kinds_run["terminal"]
    for res in _extras(kinds_run, "items"):
        for f in res["fields"]:
            for where in (md, terminal):
                assert f"largest shift from neutral {fmt(f['max_shift'])}" in where
    for res in _extras(kinds_run, "positions"):
        for where in (md, terminal):
            assert f"candidate position bias {fmt(res['pooled_bias'])}" in where
    props = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(kinds_run["dir"] / "junit.xml").iter("property")
    }
    (items,) = _extras(kinds_run, "items")
    assert float(props["recfair.first_name.price.max_shift"]) == items["fields"][0]["max_shift"]
    (positions,) = _extras(kinds_run, "positions")
    assert float(props["recfair.religion.position_bias"]) == positions["pooled_bias"]
    assert float(props["recfair.religion.p_uniform"]) == positions["p_uniform"]


@pytest.fixture(scope="module")
def roleplay_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One replay of the demo's role-play audit (audits/test_roleplay.py), as ``kinds_run``."""
    run = _demo_run(tmp_path_factory.mktemp("roleplay"), "audits/test_roleplay.py")
    (result,) = run["results"]
    return {**run, "data": result["roleplay"]}


def _roleplay_numbers(data: dict[str, Any]) -> list[str]:
    """Every rate, interval bound and count of the role-play cells, as the reports print them."""
    out = []
    for c in data["cells"]:
        out += [fmt(c["rate"]), fmt(c["low"]), fmt(c["high"])]
        out.append(f"{c['biased']}/{c['n']}")
    return out


def test_html_shows_the_roleplay_rates_and_worst_roles(
    roleplay_run: dict[str, Any], tmp_path: Path
) -> None:
    chromium = _chromium()
    done = _run(chromium, tmp_path, "--dump-dom", (roleplay_run["dir"] / "r.html").as_uri())
    dom = done.stdout
    assert "Fairness report" in dom, f"no DOM dumped; chromium said:\n{done.stderr[-2000:]}"
    text = _text(dom)
    data = roleplay_run["data"]
    missing = [n for n in _roleplay_numbers(data) if n not in text]
    assert not missing, f"not on the page: {missing}"
    assert "Role-play bias" in text
    assert "role-play bias (parsed oracle)" in text
    assert data["worst_roles"], "the demo's planted role bias shows no biased role"
    for role in data["worst_roles"]:
        assert role["role"] in text
        for ex in role["examples"]:
            assert " ".join(ex["question"].split()) in " ".join(text.split())
            for answer in ex["answers"]:
                assert " ".join(answer.split()) in " ".join(text.split())
    assert "SNSR [95% CI]" not in text
    assert "jaccard@" not in text


def test_roleplay_markdown_terminal_and_junit(roleplay_run: dict[str, Any]) -> None:
    md = (roleplay_run["dir"] / "r.md").read_text(encoding="utf-8")
    terminal = " ".join(roleplay_run["terminal"].split())
    labels = {"yesno": "Yes/No", "choice": "Choice", "why": "Why"}
    props = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(roleplay_run["dir"] / "junit.xml").iter("property")
    }
    for c in roleplay_run["data"]["cells"]:
        shown = (
            f"religion · {labels[c['qtype']]}: biased {c['biased']}/{c['n']} = "
            f"{fmt(c['rate'])} [{fmt(c['low'])}, {fmt(c['high'])}]"
        )
        assert shown in md
        assert shown in terminal
        assert float(props[f"recfair.religion.{c['qtype']}.biased_rate"]) == c["rate"]
