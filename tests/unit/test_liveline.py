"""The progress line: redrawn on a terminal, one line per tenth elsewhere."""

from __future__ import annotations

from pytest_recfair.providers.runstate import LiveLine


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_tty_redraws_with_rate_eta_failures_tokens_cost() -> None:
    clock = Clock()
    drawn: list[str] = []
    lines: list[str] = []
    live = LiveLine(40, tty=True, rewrite=drawn.append, write_line=lines.append, now=clock)
    for i in range(20):
        clock.t += 0.25
        live.advance(failed=i == 3, tokens=100, cost=0.001)
    assert drawn[-1] == "recfair: 20/40 (50%)  4.0/s  ETA 0:05  1 failed  2,000 tokens  $0.0200"
    assert lines == []
    clock.t += 0.01
    live.advance()  # within min_interval: not redrawn
    assert drawn[-1].startswith("recfair: 20/40")
    live.close()
    assert drawn[-1].startswith("recfair: 21/40")
    assert lines == [""]


def test_not_a_tty_prints_a_line_per_tenth() -> None:
    clock = Clock()
    lines: list[str] = []
    live = LiveLine(200, tty=False, rewrite=lambda s: None, write_line=lines.append, now=clock)
    for _ in range(200):
        clock.t += 0.2
        live.advance(tokens=3)
    assert len(lines) == 10
    assert lines[0].startswith("recfair: 20/200 (10%)")
    assert lines[-1].startswith("recfair: 200/200 (100%)")
    assert "in 0:40" in lines[-1]
    assert "$" not in lines[-1]  # no prices: no cost
    live.close()
    assert len(lines) == 10


def test_not_a_tty_a_short_run_writes_nothing() -> None:
    """Off a terminal, a run shorter than log_after (2 s) stays quiet; a tenth reached
    after it is written."""
    clock = Clock()
    lines: list[str] = []
    live = LiveLine(100, tty=False, rewrite=lambda s: None, write_line=lines.append, now=clock)
    for _ in range(50):
        clock.t += 0.01
        live.advance()
    assert lines == []
    clock.t += 5
    for _ in range(50):
        live.advance()
    # the first line is the tenth reached once the run is no longer short
    assert [line.split(" (")[0] for line in lines] == [
        f"recfair: {n}/100" for n in (51, 60, 70, 80, 90, 100)
    ]
