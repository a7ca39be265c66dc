"""Recording through the simulator: replies the runner retries never reach the cassette."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.prompts.seeds import load_seeds
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import SimServer


def _saved(root: Path) -> Counter[tuple[str, str]]:
    """(user prompt, repeat) -> interactions saved under ``root``; every one a 200."""
    found: Counter[tuple[str, str]] = Counter()
    for path in root.rglob("*.json"):
        for item in json.loads(path.read_text(encoding="utf-8"))["interactions"]:
            assert item["response"]["status"]["code"] == 200
            json.loads(item["response"]["body"]["string"])  # whole, not cut off
            body = json.loads(item["request"]["body"])
            prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
            found[(prompt, item["request"]["headers"]["x-recfair-repeat"][0])] += 1
    return found


def test_malformed_replies_leave_one_interaction_per_prompt(tmp_path: Path) -> None:
    cases = build_cases("faireval", "natural", load_seeds("directors")[:2], k=10, repeats=2)
    with SimServer(SimulatedRecommender("demo"), faults="malformed=0.3", seed=4) as server:
        provider = from_config("openai", model="recfair-sim-1", base_url=server.base_url)
        store = CassetteStore(tmp_path, "once")
        live = run_cases(provider, cases, concurrency=8, timeout=10, max_retries=8,
                         backoff=0.001, cassettes=store, test_id="t::rec")  # fmt: skip
        malformed = server.stats.outcomes["malformed"]
        served = server.stats.requests
    assert malformed > 0, "the fault plan fired"
    assert live.errors == {}
    assert live.retries == malformed
    assert _saved(tmp_path) == Counter((c.prompt, str(c.repeat)) for c in cases)

    replay = CassetteStore(tmp_path, "none")
    replayed = run_cases(provider, cases, cassettes=replay, test_id="t::rec")
    assert replayed.completions == live.completions
    assert replayed.requests == len(cases) < served
