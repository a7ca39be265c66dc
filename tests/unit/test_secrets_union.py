"""One scrub list (issue 19): every credential header and query parameter that the
cassettes or ``secrets`` caught before is caught by both now.

A key is planted under every name of the union, unregistered (so only the name can catch
it), in a recorded interaction and in text; neither the cassette file nor the scrubbed
text holds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_recfair import secrets
from pytest_recfair.cassettes import store as cassette_store
from pytest_recfair.cassettes.store import CassetteStore
from pytest_recfair.cassettes.vcrfile import RecordedRequest, RecordedResponse
from pytest_recfair.secrets import FILTERED, SECRET_HEADERS, SECRET_QUERY_PARAMS, Scrubber

# The lists as they were before the merge: cassettes/store.py (7 request headers, 3 response
# headers, 2 query parameters) and secrets.py (10 headers, 13 parameters).
OLD_CASSETTE_REQUEST = {
    "authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
}
OLD_CASSETTE_RESPONSE = {"set-cookie", "openai-organization", "openai-project"}
OLD_CASSETTE_PARAMS = {"key", "api_key"}
OLD_SECRETS_HEADERS = {
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
    "set-cookie",
    "x-auth-token",
}
OLD_SECRETS_PARAMS = {
    "key",
    "api_key",
    "api-key",
    "apikey",
    "access_token",
    "auth_token",
    "token",
    "secret",
    "client_secret",
    "password",
    "x-goog-api-key",
    "sig",
    "signature",
}
HEADERS = sorted(OLD_CASSETTE_REQUEST | OLD_CASSETTE_RESPONSE | OLD_SECRETS_HEADERS)
PARAMS = sorted(OLD_CASSETTE_PARAMS | OLD_SECRETS_PARAMS)

# No published key shape and never registered: only the header or parameter name tells.
KEY = "Zq7PlantedUnionKey4815162342"
URL = "https://api.example.test/v1/chat/completions"


def test_the_one_list_is_the_union_of_both_old_lists() -> None:
    assert set(HEADERS) <= SECRET_HEADERS
    assert set(PARAMS) <= SECRET_QUERY_PARAMS
    assert cassette_store.FILTERED is secrets.FILTERED  # one FILTERED


def _recorded(tmp_path: Path, headers: list[tuple[str, str]], query: str) -> dict[str, object]:
    store = CassetteStore(tmp_path, "new_episodes", autosave=None)
    body = json.dumps({"messages": [{"role": "user", "content": "films"}]}).encode()
    store.record(
        "t.py::test_x",
        "nolan",
        RecordedRequest("POST", f"{URL}?{query}&alt=json", tuple(headers), body),
        RecordedResponse(200, (*headers, ("content-type", "application/json")), b'{"ok": 1}'),
    )
    (path,) = store.flush()
    written = path.read_bytes()
    assert KEY.encode() not in written, f"the planted key reached {path}"
    (item,) = json.loads(written)["interactions"]
    return item  # type: ignore[no-any-return]


def test_every_name_of_the_union_is_dropped_from_cassettes(tmp_path: Path) -> None:
    headers = [(name.title(), f"{KEY}-{name}") for name in HEADERS]
    query = "&".join(f"{param}={KEY}" for param in PARAMS)
    item = _recorded(tmp_path, headers, query)
    request, response = item["request"], item["response"]  # type: ignore[index]
    for side in (request, response):
        assert not {n.lower() for n in side["headers"]} & set(HEADERS)
    assert request["uri"] == f"{URL}?alt=json"


@pytest.mark.parametrize("name", HEADERS)
def test_each_header_of_the_union_is_scrubbed_from_text(name: str) -> None:
    scrub = Scrubber().scrub_text
    for text in (
        f"{name}: {KEY}",
        f"{name.title()}= {KEY}",
        json.dumps({name: KEY}),
        f"{{'{name}': '{KEY}'}}",
        f"[(b'{name}', b'{KEY}')]",  # httpcore's DEBUG log of response headers
    ):
        out = scrub(text)
        assert KEY not in out, text
        assert FILTERED in out
    assert Scrubber().scrub_headers([(name, KEY)]) == [(name, FILTERED)]
    assert Scrubber().scrub_json({name: KEY}) == {name: FILTERED}


@pytest.mark.parametrize("param", PARAMS)
def test_each_parameter_of_the_union_is_scrubbed_from_text(param: str) -> None:
    scrub = Scrubber().scrub_text
    for text in (f"GET {URL}?{param}={KEY}&alt=json", f"{URL}?a=1&{param}={KEY}"):
        out = scrub(text)
        assert KEY not in out, text
        assert FILTERED in out
    assert Scrubber().scrub_json({param: KEY}) == {param: FILTERED}


def test_the_length_rule_keeps_each_reach(tmp_path: Path) -> None:
    """Cassettes replace a registered value of 4+ characters (as before); text takes
    8+ (a shorter one would mangle test names: "test", "EMPTY")."""
    assert secrets.MIN_CASSETTE_SECRET_CHARS == 4
    assert secrets.MIN_SECRET_CHARS == 8
    short = "k3Y9"
    store = CassetteStore(tmp_path, "new_episodes", secrets=[short, "ab"], autosave=None)
    store.record(
        "t.py::test_x",
        "e",
        RecordedRequest("POST", URL, (("x-echo", short),), b'{"q": "k3Y9"}'),
        RecordedResponse(200, (), b'{"a": "k3Y9 and ab"}'),
    )
    (path,) = store.flush()
    text = path.read_text("utf-8")
    assert short not in text
    assert "and ab" in text  # under 4: left alone
    assert Scrubber([short]).values == frozenset()
    assert secrets.is_secret_value("12345678")
    assert not secrets.is_secret_value("1234567")
    assert secrets.is_secret_value(" k3Y9 ", minimum=secrets.MIN_CASSETTE_SECRET_CHARS)
    assert not secrets.is_secret_value(None)


def test_cassettes_replace_every_form_of_a_registered_value(tmp_path: Path) -> None:
    key = "sk é/+ planted"  # URL-encoded and JSON-escaped forms differ from the value
    store = CassetteStore(tmp_path, "new_episodes", secrets=[key], autosave=None)
    body = json.dumps({"plain": key, "escaped": key}, ensure_ascii=True).encode()
    store.record(
        "t.py::test_x",
        "e",
        RecordedRequest("POST", f"{URL}?q=" + "sk%20%C3%A9%2F%2B%20planted", (), body),
        RecordedResponse(200, (), json.dumps({"a": key}, ensure_ascii=False).encode()),
    )
    (path,) = store.flush()
    text = path.read_text("utf-8")
    for form in secrets.forms(key):
        assert form not in text, form


def test_a_file_written_before_the_union_is_saved_with_it(tmp_path: Path) -> None:
    """An older version dropped only 7 request headers, 3 response headers and 2 query
    parameters: what it kept under the other names goes when the file is saved again,
    and the recording still replays."""
    store = CassetteStore(tmp_path, "new_episodes", autosave=None)
    body = json.dumps({"messages": [{"role": "user", "content": "films"}]}).encode()
    store.record("t.py::test_x", "nolan", RecordedRequest("POST", URL, (), body), _ok("old"))
    (path,) = store.flush()
    data = json.loads(path.read_text("utf-8"))
    (item,) = data["interactions"]
    item["request"]["headers"]["X-Auth-Token"] = [KEY]
    item["request"]["uri"] = f"{URL}?token={KEY}&alt=json"
    item["response"]["headers"]["Proxy-Authorization"] = [KEY]
    path.write_text(json.dumps(data), encoding="utf-8")

    again = CassetteStore(tmp_path, "new_episodes", autosave=None)
    other = json.dumps({"messages": [{"role": "user", "content": "more films"}]}).encode()
    again.record("t.py::test_x", "nolan", RecordedRequest("POST", URL, (), other), _ok("new"))
    again.flush()
    assert KEY.encode() not in path.read_bytes()
    replay = CassetteStore(tmp_path)
    hit = replay.lookup("t.py::test_x", "nolan", "POST", URL, body, 0)
    assert hit is not None
    assert hit.body == b'{"r": "old"}'


def _ok(text: str) -> RecordedResponse:
    return RecordedResponse(
        200, (("content-type", "application/json"),), json.dumps({"r": text}).encode()
    )
