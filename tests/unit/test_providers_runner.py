"""run_cases / arun_cases with httpx.MockTransport: retries, failures, concurrency, usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse
from pytest_recfair.errors import ConfigError, ProviderError
from pytest_recfair.providers import from_config, run_cases
from pytest_recfair.providers.http import HTTPProvider
from pytest_recfair.providers.pacing import retry_after_seconds
from pytest_recfair.providers.runstate import RunOutcome
from tests.support.cases import Case

BASE = "http://127.0.0.1:8000/v1"  # loopback: no API key needed


def _cases(n: int) -> list[Case]:
    return [Case(f"c{i}", f"prompt number {i} " + "x" * i, f"e{i % 3}") for i in range(n)]


def _ok(request: httpx.Request, *, usage: tuple[int, int] | None = None) -> httpx.Response:
    prompt = json.loads(request.content)["messages"][-1]["content"]
    payload: dict[str, object] = {
        "model": "m-1",
        "choices": [{"message": {"content": f"1. {prompt}"}, "finish_reason": "stop"}],
    }
    if usage is not None:
        payload["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return httpx.Response(200, json=payload)


def _provider(**kwargs: object) -> HTTPProvider:
    return from_config("openai", model="m", base_url=BASE, **kwargs)  # type: ignore[arg-type]


class Sleeps:
    """Records back-off waits instead of sleeping them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _run(
    handler: Callable[[httpx.Request], Any],
    cases: list[Case],
    sleeps: Sleeps | None = None,
    **kwargs: object,
) -> RunOutcome:
    options: dict[str, object] = {"transport": httpx.MockTransport(handler)}
    options["sleep"] = sleeps if sleeps is not None else Sleeps()
    options.update(kwargs)
    provider = options.pop("provider", None) or _provider()
    return run_cases(provider, cases, **options)  # type: ignore[arg-type]


def test_429_with_retry_after_seconds_is_honoured_then_succeeds() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "7"}, json={"error": "slow down"})
        return _ok(request)

    sleeps = Sleeps()
    outcome = _run(handler, _cases(1), sleeps)
    assert outcome.errors == {}
    assert outcome.completions["c0"].text.startswith("1. prompt number 0")
    assert sleeps.waits == [7.0]
    assert (outcome.requests, outcome.retries) == (2, 1)


def test_retry_after_http_date_and_ms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(httpx.Headers({"retry-after": later}), now=now) == 30.0
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(httpx.Headers({"retry-after": past}), now=now) == 0.0
    assert retry_after_seconds(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_seconds(httpx.Headers({})) is None


def test_huge_retry_after_is_capped() -> None:
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            return httpx.Response(503, headers={"Retry-After": "86400"})
        return _ok(request)

    sleeps = Sleeps()
    _run(handler, _cases(1), sleeps, max_retry_after=12.0)
    assert sleeps.waits == [12.0]


def test_500_then_503_then_success_with_growing_backoff() -> None:
    statuses = [500, 503]

    def handler(request: httpx.Request) -> httpx.Response:
        if statuses:
            return httpx.Response(statuses.pop(0), text="upstream error")
        return _ok(request)

    sleeps = Sleeps()
    outcome = _run(handler, _cases(1), sleeps, backoff=1.0, max_backoff=100.0)
    assert outcome.errors == {}
    assert outcome.requests == 3
    assert len(sleeps.waits) == 2
    # Exponential with jitter in [0, backoff): the 1st wait is in [1, 2), the 2nd in [2, 3).
    assert 1.0 <= sleeps.waits[0] < 2.0 <= sleeps.waits[1] < 3.0


def test_retry_budget_spent_gives_a_clear_per_case_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if b"number 1 " in request.content:
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return _ok(request)

    outcome = _run(handler, _cases(3), max_retries=2)
    assert set(outcome.completions) == {"c0", "c2"}
    message = outcome.errors["c1"]
    for words in ("'c1'", "3 tries", "2 retries", "HTTP 503", "overloaded", "max_retries"):
        assert words in message
    assert outcome.requests == 5


def test_429_exhaustion_advises_lowering_concurrency() -> None:
    outcome = _run(lambda r: httpx.Response(429), _cases(1), max_retries=1, concurrency=3)
    assert "lower concurrency (now 3)" in outcome.errors["c0"]


def test_401_aborts_at_once_and_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECFAIR_TEST_KEY", "sk-wrong")
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers["authorization"])
        return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})

    provider = from_config(
        "openai", model="m", base_url="https://gw.example/v1", api_key_env="RECFAIR_TEST_KEY"
    )
    with pytest.raises(ProviderError) as info:
        _run(handler, _cases(50), provider=provider, concurrency=4)
    message = str(info.value)
    assert "401" in message
    assert "RECFAIR_TEST_KEY" in message
    assert "Incorrect API key" in message
    assert "sk-wrong" not in message
    assert len(calls) <= 4  # no retries, and the rest of the run was cancelled


def test_404_names_model_and_base_url() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"message": "model 'm' not found"}})

    with pytest.raises(ProviderError) as info:
        _run(handler, _cases(5))
    message = str(info.value)
    assert "404" in message
    assert "'m'" in message
    assert BASE in message
    assert "/v1" in message


def test_400_is_per_case_and_not_retried() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if b"number 0 " in request.content:
            return httpx.Response(400, json={"error": {"message": "context too long"}})
        return _ok(request)

    outcome = _run(handler, _cases(2))
    assert "context too long" in outcome.errors["c0"]
    assert "c1" in outcome.completions
    assert outcome.requests == 2


def test_non_json_200_is_retried_then_a_per_case_error() -> None:
    outcome = _run(
        lambda r: httpx.Response(200, text="<html>login</html>"), _cases(2), max_retries=2
    )
    assert len(outcome.errors) == 2
    assert "not JSON" in outcome.errors["c0"]
    assert outcome.requests == 2 * 3  # a garbled body is a transport failure: retried


def test_timeouts_are_retried_then_reported() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return _ok(request)

    outcome = _run(handler, _cases(1), timeout=0.05, max_retries=1)
    message = outcome.errors["c0"]
    assert "timeout" in message
    assert "2 tries" in message
    assert "Raise timeout (now 0.05 s)" in message


def test_unreachable_base_url_aborts_with_one_error() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("Connection refused", request=request)

    with pytest.raises(ProviderError) as info:
        _run(handler, _cases(20), max_retries=2, concurrency=2)
    message = str(info.value)
    assert "cannot connect" in message
    assert "Connection refused" in message
    assert "3 tries" in message
    assert len(calls) <= 2 * 3


def test_dropped_connection_is_retried() -> None:
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            raise httpx.RemoteProtocolError("peer closed connection", request=request)
        return _ok(request)

    outcome = _run(handler, _cases(1))
    assert outcome.errors == {}
    assert outcome.retries == 1


def test_concurrency_bound_is_respected() -> None:
    state = {"now": 0, "max": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.005)
        state["now"] -= 1
        return _ok(request)

    outcome = _run(handler, _cases(40), concurrency=5)
    assert len(outcome.completions) == 40
    assert state["max"] == 5


def test_usage_and_cost_are_summed() -> None:
    cases = _cases(6)

    def handler(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][-1]["content"]
        return _ok(request, usage=(len(prompt), 2 * len(prompt)))

    outcome = _run(handler, cases, prices=(0.5, 4.0))
    prompt_tokens = sum(len(c.prompt) for c in cases)
    assert outcome.usage.prompt_tokens == prompt_tokens
    assert outcome.usage.completion_tokens == 2 * prompt_tokens
    expected = prompt_tokens * 0.5 / 1e6 + 2 * prompt_tokens * 4.0 / 1e6
    assert outcome.cost == pytest.approx(expected)
    assert _run(handler, cases).cost is None


def test_replies_without_usage_are_counted() -> None:
    outcome = _run(_ok, _cases(3))
    assert outcome.usage.total_tokens == 0
    assert outcome.unknown_usage == 3


def test_requests_carry_case_extensions_and_results_keep_case_order() -> None:
    seen: dict[str, tuple[str, int, str]] = {}
    cases = [Case("b", "p-b", "ent-2", 1, "sys"), Case("a", "p-a", "ent-1", 0)]

    async def handler(request: httpx.Request) -> httpx.Response:
        ext = request.extensions
        seen[ext["recfair_case"].id] = (ext["recfair_entity_id"], ext["recfair_repeat"], "")
        if ext["recfair_case"].id == "b":
            await asyncio.sleep(0.02)  # finishes last
        return _ok(request)

    outcome = _run(handler, cases)
    assert seen == {"b": ("ent-2", 1, ""), "a": ("ent-1", 0, "")}
    assert list(outcome.completions) == ["b", "a"]


def test_missing_key_aborts_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECFAIR_ABSENT_KEY", raising=False)
    calls: list[int] = []
    provider = from_config(
        "openai", model="m", base_url="https://gw.example/v1", api_key_env="RECFAIR_ABSENT_KEY"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return _ok(request)

    with pytest.raises(ProviderError, match="RECFAIR_ABSENT_KEY is not set"):
        _run(handler, _cases(3), provider=provider)
    assert calls == []


def test_works_inside_a_running_event_loop() -> None:
    async def main() -> RunOutcome:
        return _run(_ok, _cases(2))

    outcome = asyncio.run(main())
    assert len(outcome.completions) == 2


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"concurrency": 0}, "concurrency:"),
        ({"timeout": 0}, "timeout:"),
        ({"max_retries": -1}, "max_retries:"),
        ({"prices": (1.0,)}, "prices:"),
    ],
)
def test_bad_run_options(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _run(_ok, _cases(1), **kwargs)


def test_duplicate_case_ids_are_rejected() -> None:
    with pytest.raises(ConfigError, match="'x' occurs more than once"):
        _run(_ok, [Case("x", "p"), Case("x", "q")])


def test_records_then_replays_through_cassettes(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.miss import CassetteMiss
    from pytest_recfair.cassettes.store import CassetteStore

    cases = _cases(4)
    recorded = _run(_ok, cases, cassettes=CassetteStore(tmp_path, "once"), test_id="t::a")
    assert len(recorded.completions) == 4
    assert list(tmp_path.rglob("*")), "flush() wrote the cassettes"

    def offline(request: httpx.Request) -> httpx.Response:
        raise AssertionError("replay must not reach the network")

    replayed = _run(offline, cases, cassettes=CassetteStore(tmp_path, "none"), test_id="t::a")
    assert replayed.completions == recorded.completions

    with pytest.raises(CassetteMiss):
        _run(offline, [*cases, Case("new", "unseen")], cassettes=CassetteStore(tmp_path, "none"),
             test_id="t::a")  # fmt: skip


def test_cut_off_json_reply_is_retried() -> None:
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            return httpx.Response(200, content=_ok(request).content[:25])
        return _ok(request)

    outcome = _run(handler, _cases(1))
    assert outcome.errors == {}
    assert outcome.retries == 1
    always_cut = _run(lambda r: httpx.Response(200, content=b'{"choices": [{'), _cases(1),
                      max_retries=1)  # fmt: skip
    assert "cut off" in always_cut.errors["c0"]
    assert "2 tries" in always_cut.errors["c0"]


def test_proxy_variables_apply_to_remote_urls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_recfair.providers.workers import env_proxy

    for name in ("ALL_PROXY", "all_proxy", "http_proxy", "HTTP_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("https_proxy", "proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert env_proxy("https://api.openai.com/v1") == "http://proxy.corp:3128"
    assert env_proxy("https://llm.internal.example/v1") is None
    assert env_proxy("http://127.0.0.1:8000/v1") is None
    assert env_proxy("http://api.example/v1") is None  # no HTTP_PROXY set


def test_403_aborts_and_says_the_key_lacks_access(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECFAIR_TEST_KEY", "sk-1")
    provider = from_config(
        "anthropic", model="claude-x", base_url="https://gw.example", api_key_env="RECFAIR_TEST_KEY"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        error = {"type": "error", "error": {"type": "permission_error", "message": "no access"}}
        return httpx.Response(403, json=error)

    with pytest.raises(ProviderError) as info:
        _run(handler, _cases(3), provider=provider)
    message = str(info.value)
    for words in ("403", "'claude-x'", "RECFAIR_TEST_KEY", "no access (permission_error)"):
        assert words in message


# --------------------------------------------------------------------------- replay pass


def _cassette_replies(root: Path) -> list[tuple[str, int]]:
    """(user prompt, status) of every interaction saved under ``root``."""
    found = []
    for path in sorted(root.rglob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8"))["interactions"]:
            prompt = json.loads(item["request"]["body"])["messages"][-1]["content"]
            found.append((prompt, item["response"]["status"]["code"]))
    return found


def test_replay_without_a_client_gives_what_the_client_path_gives(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.store import CassetteStore
    from pytest_recfair.providers.transport import CassetteTransport

    cases = _cases(12)
    provider = _provider()
    recorded = _run(
        lambda r: _ok(r, usage=(7, 11)),
        cases,
        cassettes=CassetteStore(tmp_path, "once"),
        test_id="t::a",
    )

    def offline(request: httpx.Request) -> httpx.Response:
        raise AssertionError("replay must not reach the network")

    replayed = _run(offline, cases, cassettes=CassetteStore(tmp_path, "none"), test_id="t::a")

    async def through_client() -> dict[str, Any]:
        # The normal path: AsyncClient + CassetteTransport + parse_response.
        transport = CassetteTransport(CassetteStore(tmp_path, "none"), "t::a")
        out = {}
        async with httpx.AsyncClient(transport=transport) as client:
            for case in cases:
                request = provider.build_request(case.system, case.prompt)
                request.extensions = {"recfair_entity_id": case.entity_id, "recfair_repeat": 0}
                out[case.id] = provider.parse_response(await client.send(request))
        return out

    assert replayed.errors == {}
    assert replayed.completions == recorded.completions == asyncio.run(through_client())
    assert replayed.usage == recorded.usage
    assert replayed.requests == len(cases)
    assert replayed.retries == 0


def test_replay_miss_is_the_cassette_transports_error(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.miss import CassetteMiss
    from pytest_recfair.cassettes.store import CassetteStore
    from pytest_recfair.providers.transport import CassetteTransport

    cases = _cases(3)
    _run(_ok, cases, cassettes=CassetteStore(tmp_path, "once"), test_id="t::a")
    unseen = Case("new", "an unseen prompt", entity_id="e1")
    with pytest.raises(CassetteMiss) as fast:
        _run(_ok, [*cases, unseen], cassettes=CassetteStore(tmp_path, "none"), test_id="t::a")

    async def through_transport() -> None:
        request = _provider().build_request(unseen.system, unseen.prompt)
        request.extensions = {"recfair_entity_id": "e1", "recfair_repeat": 0,
                              "recfair_case": unseen}  # fmt: skip
        await CassetteTransport(CassetteStore(tmp_path, "none"), "t::a").handle_async_request(
            request
        )

    with pytest.raises(CassetteMiss) as slow:
        asyncio.run(through_transport())
    # the replay pass also counts the prompts without a recording (1 of the 4 asked)
    assert str(fast.value) == str(slow.value.counted(1, 4))
    assert "an unseen prompt" in str(fast.value)


def test_retried_replies_are_not_recorded(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.store import CassetteStore

    tries: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][-1]["content"]
        tries[prompt] = tries.get(prompt, 0) + 1
        if tries[prompt] == 1:  # a 200 cut off mid-JSON
            return httpx.Response(200, content=_ok(request).content[:30])
        if tries[prompt] == 2:  # overloaded; not one of the statuses never recorded
            return httpx.Response(529, json={"error": {"message": "overloaded"}})
        return _ok(request)

    cases = _cases(6)
    sleeps = Sleeps()
    outcome = _run(handler, cases, sleeps, cassettes=CassetteStore(tmp_path, "once"),
                   test_id="t::a")  # fmt: skip
    assert outcome.errors == {}
    assert outcome.retries == 2 * len(cases)
    saved = _cassette_replies(tmp_path)
    assert sorted(saved) == sorted((c.prompt, 200) for c in cases)

    replayed = _run(lambda r: pytest.fail("no network in replay"), cases,
                    cassettes=CassetteStore(tmp_path, "none"), test_id="t::a")  # fmt: skip
    assert replayed.completions == outcome.completions
    assert replayed.retries == 0


def test_an_error_reply_is_not_recorded_and_asked_again(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.store import CassetteStore

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "context too long"}})

    cases = _cases(2)
    live = _run(handler, cases, cassettes=CassetteStore(tmp_path, "once"), test_id="t::a")
    assert set(live.errors) == {"c0", "c1"}
    assert _cassette_replies(tmp_path) == []
    again = _run(_ok, cases, cassettes=CassetteStore(tmp_path, "once"), test_id="t::a")
    assert again.errors == {}
    assert again.requests == 2


def test_a_stored_retryable_reply_of_an_older_version_is_skipped(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.miss import CassetteNote
    from pytest_recfair.cassettes.store import CassetteStore

    case = Case("c0", "one prompt", entity_id="e0")
    request = _provider().build_request(case.system, case.prompt)
    store = CassetteStore(tmp_path, "new_episodes")
    sent = RecordedRequest("POST", str(request.url), tuple(request.headers.multi_items()),
                           request.content)  # fmt: skip
    store.record("t::a", "e0", sent, RecordedResponse(200, (), _ok(request).content, "OK"))
    (path,) = store.flush()
    data = json.loads(path.read_text("utf-8"))
    busy = json.loads(json.dumps(data["interactions"][0]))
    busy["response"] = {"status": {"code": 503, "message": "busy"}, "headers": {},
                        "body": {"string": '{"error": "busy"}'}}  # fmt: skip
    data["interactions"].insert(0, busy)  # what an older version could store
    path.write_text(json.dumps(data), encoding="utf-8")
    sleeps = Sleeps()
    with pytest.warns(CassetteNote):
        outcome = _run(lambda r: pytest.fail("no network in replay"), [case], sleeps,
                       cassettes=CassetteStore(tmp_path, "none"), test_id="t::a")  # fmt: skip
    assert outcome.errors == {}
    assert outcome.completions["c0"].text == "1. one prompt"
    assert outcome.retries == 0


def test_live_requests_are_spread_over_bounded_pools() -> None:
    from pytest_recfair.providers import workers as clients

    async def build_and_close() -> list[Any]:
        used = clients.transports(_provider(), None, None, "", 40)
        pools = [t.inner.pool for t in used]  # type: ignore[attr-defined]
        for t in used:
            await t.aclose()
        return pools

    pools = asyncio.run(build_and_close())
    assert len(pools) == -(-40 // clients.SHARD_CONNECTIONS)
    assert sum(p._max_connections for p in pools) >= 40
    assert all(p._max_connections == p._max_keepalive_connections for p in pools)
    # A given transport is one object: one pool.
    assert len(clients.transports(_provider(), httpx.MockTransport(_ok), None, "", 40)) == 1


def test_each_cassette_is_saved_once_its_entity_is_done(tmp_path: Path) -> None:
    from pytest_recfair.cassettes.store import CassetteStore

    store = CassetteStore(tmp_path, "once", autosave=None)
    cases = [Case(f"c{i}", f"prompt {i}", entity_id=f"e{i // 2}") for i in range(6)]
    seen_on_disk: list[bool] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.extensions["recfair_entity_id"] == "e2":
            seen_on_disk.append(store.path_for("e0").exists())
        return _ok(request)

    outcome = _run(handler, cases, cassettes=store, test_id="t::a", concurrency=1)
    assert outcome.errors == {}
    assert seen_on_disk == [True, True]  # e0 was saved before the run ended
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["e0.json", "e1.json", "e2.json"]


def test_options_object_and_keyword_overrides_give_the_same_run() -> None:
    from pytest_recfair.providers.runstate import RunOptions

    cases = _cases(6)
    options = RunOptions(concurrency=2, transport=httpx.MockTransport(_ok), sleep=Sleeps())
    by_object = run_cases(_provider(), cases, options)
    by_override = run_cases(_provider(), cases, options, concurrency=3, prices=(1.0, 2.0))
    assert {k: c.text for k, c in by_object.completions.items()} == {
        k: c.text for k, c in by_override.completions.items()
    }
    assert len(by_object.completions) == 6
    assert by_object.cost is None
    assert by_override.cost is not None


def test_unknown_run_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="concurency"):
        run_cases(_provider(), _cases(1), concurency=2)


def _in_time(run: Callable[[], RunOutcome], seconds: float) -> RunOutcome:
    """``run()`` in a thread: a run that hangs fails the test instead of the suite."""
    import threading

    box: list[RunOutcome] = []
    worker = threading.Thread(target=lambda: box.append(run()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"the run did not finish within {seconds:g} s"
    return box[0]


@pytest.mark.parametrize("retry_after", ["86400", "inf", "1e999", "an HTTP date a day ahead"])
def test_a_hostile_retry_after_holds_the_pacer_no_longer_than_a_retry_waits(
    retry_after: str,
) -> None:
    """Issue 33 point 1: one 429 saying "a day" (or inf) held every later request of the
    endpoint for that long (the retry wait was capped, the pacer's hold was not)."""
    if retry_after.startswith("an HTTP date"):  # made here: a test id must not change
        retry_after = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": retry_after}, json={"e": "x"})
        return _ok(request)

    outcome = _in_time(lambda: _run(handler, _cases(3), max_retry_after=0.2), 30.0)
    assert outcome.errors == {}
    assert sorted(outcome.completions) == ["c0", "c1", "c2"]


@pytest.mark.parametrize("value", ["inf", "1e999", "-inf", "nan"])
def test_a_reply_stating_infinite_limits_is_kept(value: str) -> None:
    """Issue 33 point 1: ``x-ratelimit-limit-requests: inf`` raised OverflowError in the
    header parser and the paid reply was lost; an unusable count states no limit."""

    def handler(request: httpx.Request) -> httpx.Response:
        reply = _ok(request)
        headers = {
            "x-ratelimit-limit-requests": value,
            "x-ratelimit-remaining-requests": value,
            "x-ratelimit-reset-requests": value,
            "x-ratelimit-limit-tokens": value,
        }
        return httpx.Response(200, headers=headers, content=reply.content)

    outcome = _in_time(lambda: _run(handler, _cases(2)), 30.0)
    assert outcome.errors == {}
    assert sorted(outcome.completions) == ["c0", "c1"]
    assert retry_after_seconds(httpx.Headers({"retry-after": value})) is None


class _Notes:
    """A pytest progress line that keeps the lines noted on it."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def advance(self, *, failed: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        pass

    def note(self, text: str) -> None:
        self.lines.append(text)


@pytest.mark.parametrize(
    ("header", "value"), [("Retry-After", "86400"), ("retry-after-ms", "86400000")]
)
def test_a_capped_retry_after_is_said_once_naming_its_header(header: str, value: str) -> None:
    """Issue 33 point 1: the pacer caps a hostile wait and says so in one line."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) <= 2:
            return httpx.Response(429, headers={header: value}, json={"e": "x"})
        return _ok(request)

    live = _Notes()
    outcome = _in_time(
        lambda: _run(handler, _cases(2), max_retry_after=0.2, live=live, max_retries=3), 30.0
    )
    assert outcome.errors == {}
    assert len(live.lines) == 1, live.lines
    assert f"a 429's {header} asked to wait 86,400 s" in live.lines[0]
    assert "0.2 s at most (max_retry_after)" in live.lines[0]


def test_a_reply_stating_absurd_usage_is_kept_and_counts_no_tokens() -> None:
    """A usage of 10**400 tokens raised OverflowError in the pacer: the run crashed."""
    outcome = _in_time(lambda: _run(lambda r: _ok(r, usage=(10**400, -5)), _cases(3)), 30.0)
    assert outcome.errors == {}
    assert sorted(outcome.completions) == ["c0", "c1", "c2"]
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (0, 0)
