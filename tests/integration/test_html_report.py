"""The HTML report renders in headless Chromium, with its SVG charts in the live DOM.

Chromium runs with every host name unresolvable, so the page must render from the file
alone. Without Chromium the tests skip, except on CI (CI=true), where they fail.
"""

from __future__ import annotations

import html
import json
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
from pytest_recfair.report.fmt import esc, fmt, p_cell
from pytest_recfair.report.registry import write_report
from pytest_recfair.report.status import headline
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
        label, biased = labels[c["qtype"]], f"{c['biased']}/{c['n']}"
        rate = f"{fmt(c['rate'])} [{fmt(c['low'])}, {fmt(c['high'])}]"
        assert f"| religion | {label} | with | {biased} | {rate} |" in md  # the role-play table
        assert f"religion · {label} · with: biased / determined {biased}, rate [95% CI] {rate}" in (
            terminal
        )
        assert float(props[f"recfair.religion.{c['qtype']}.biased_rate"]) == c["rate"]


# --- the layout of the whole demo report: summary, contents, nothing cut (issue 34) -------

#: Run in the page (a copy with this script added): opens every <details>, then lists each
#: element whose content is wider than its box — table cells, headings, labels, summaries,
#: scroll boxes — and each chart text outside its chart or its heatmap cell.
OVERFLOW_JS = """
document.querySelectorAll('details').forEach(d => { d.open = true; });
const bad = [];
const name = el => el.tagName + ': ' + el.textContent.trim().slice(0, 60);
for (const el of document.querySelectorAll(
    'td, th, h1, h2, h3, summary, .badge, .scroll, nav.toc, section.test, .total')) {
  if (el.scrollWidth > el.clientWidth + 1) bad.push(name(el));
}
for (const svg of document.querySelectorAll('svg.chart')) {
  const vb = svg.viewBox.baseVal;
  for (const t of svg.querySelectorAll('text')) {
    if (t.textContent.includes('\u2026')) bad.push('cut ' + name(t));  // an ellipsis
    const b = t.getBBox();
    if (b.x < vb.x - 1 || b.x + b.width > vb.x + vb.width + 1) bad.push('svg ' + name(t));
  }
  for (const g of svg.querySelectorAll('g.cell')) {
    const r = g.querySelector('rect').getBBox();
    for (const t of g.querySelectorAll('text')) {
      const b = t.getBBox();
      if (b.x < r.x - 1 || b.x + b.width > r.x + r.width + 1) bad.push('cell ' + name(t));
    }
  }
}
document.body.setAttribute('data-overflow', JSON.stringify(bad));
"""


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The whole bundled demo replayed (its 10 tests pass) and rendered as HTML."""
    out = tmp_path_factory.mktemp("demo")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider", "-q",
         f"--fairness-report={out / 'r.json'}", f"--fairness-report={out / 'r.html'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads((out / "r.json").read_text(encoding="utf-8"))
    return {"path": out / "r.html", "results": doc["results"]}


@pytest.fixture(scope="module")
def regressed_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's item-side, position and role-play tests against the "regressed" profile:
    every one fails, with its failure card and evidence open."""
    out = tmp_path_factory.mktemp("regressed") / "r.html"
    env = {**os.environ, "RECFAIR_DEMO_PROFILE": "audits/profiles/regressed.yaml"}
    subprocess.run(
        [sys.executable, "-m", "pytest", "--fairness", "-p", "no:cacheprovider", "-q",
         "audits/test_kinds.py", "audits/test_roleplay.py", f"--fairness-report={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert out.read_text(encoding="utf-8").count('<details class="detail" open>') == 3
    return out


def _overflowing(chromium: str, tmp_path: Path, page: Path, width: int) -> list[str]:
    probe = tmp_path / f"probe-{width}.html"
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", f"<script>{OVERFLOW_JS}</script></body>"))
    done = _run(chromium, tmp_path, f"--window-size={width},1000", "--dump-dom", probe.as_uri())
    found = re.search(r'data-overflow="([^"]*)"', done.stdout)
    assert found, f"the probe did not run; chromium said:\n{done.stderr[-2000:]}"
    listed: list[str] = json.loads(html.unescape(found.group(1)))
    return listed


@pytest.mark.parametrize("width", [1400, 800])
def test_nothing_overflows_its_box(
    demo_page: dict[str, Any],
    regressed_page: Path,
    page: tuple[Path, list[AuditResult]],
    tmp_path: Path,
    width: int,
) -> None:
    chromium = _chromium()
    # all 10 demo tests; the failing kinds with their evidence; a failing regression
    for path in (demo_page["path"], regressed_page, page[0]):
        assert _overflowing(chromium, tmp_path, path, width) == [], (path, width)
        shot = tmp_path / f"{path.stem}-{width}.png"
        _run(chromium, tmp_path, f"--screenshot={shot}", f"--window-size={width},2000",
             path.as_uri())  # fmt: skip
        assert _png_pixels(shot.read_bytes())[:2] == (width, 2000)


def test_the_page_opens_with_a_summary_linking_each_test(demo_page: dict[str, Any]) -> None:
    page = demo_page["path"].read_text(encoding="utf-8")
    toc = page.split('<nav class="toc" id="summary">', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'<a href="#(test-\d+)">([^<]+)</a>', toc)
    ids = [r["meta"]["test_id"] for r in demo_page["results"]]
    assert sorted(html.unescape(t) for _, t in links) == sorted(ids)
    for anchor, _ in links:  # each link leads to its test's section
        assert f'<section class="test" id="{anchor}">' in page
    # one line per test: status, kind, the figure every summary shows (report.status.headline)
    rows = re.findall(r"<tr><td><span class=\"badge (\w+)\">.*?</tr>", toc)
    assert rows == ["PASS"] * len(ids)
    for r in map(AuditResult.from_dict, demo_page["results"]):
        assert f"<td>{esc(headline(r))}</td></tr>" in toc
    # a passing test's detail is one click away; nothing is open on a passing run
    assert page.count('<details class="detail">') == len(ids)
    assert '<details class="detail" open>' not in page
    # no table of 1.000s: a quality table where every group is 1.000 is one line
    assert "1.000 for every group" in page


def test_a_failure_card_holds_the_baseline_to_now_table(
    page: tuple[Path, list[AuditResult]],
) -> None:
    path, results = page
    text = path.read_text(encoding="utf-8")
    failed = next(r for r in results if r.gate is not None and not r.gate.passed)
    at = text.index(f"<h2>{html.escape(failed.meta.test_id)}</h2>")
    card = text[at : text.index("<details", at)]  # before its (open) detail
    assert "<th>baseline -&gt; now [95% CI]</th>" in card
    for f in failed.gate.failures:
        assert f.baseline is not None
        assert f"{fmt(f.baseline)} [" in card  # baseline with its interval -> now
    assert '<details class="detail" open>' in text
