"""The HTML report renders in headless Chromium, with its SVG charts in the live DOM.

Chromium runs with every host name unresolvable, so the page must render from the file
alone. Without Chromium the tests skip, except on CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_recfair import report
from pytest_recfair.gate import thresholds as gate
from pytest_recfair.results import AuditResult
from tests.support import synth_results

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
    report.write_report(path, results, {r.meta.test_id: baseline for r in results})
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
