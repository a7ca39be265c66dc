"""The scrubber removes configured key values and secrets by shape, and leaves titles alone."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from pytest_recfair import secrets
from pytest_recfair.secrets import FILTERED, Scrubber

KEY = "k3y-PLANTED/value+with=odd&chars_0123456789"


@pytest.fixture
def scrubber() -> Scrubber:
    return Scrubber([KEY])


@pytest.mark.parametrize(
    "form",
    [KEY, quote(KEY, safe=""), json.dumps(KEY)[1:-1]],
    ids=["plain", "url-encoded", "json-escaped"],
)
def test_registered_value_in_any_form(scrubber: Scrubber, form: str) -> None:
    out = scrubber.scrub_text(f"error: the service said {form!s} is wrong")
    assert form not in out
    assert FILTERED in out


def test_bytes_keep_non_utf8_around_the_secret(scrubber: Scrubber) -> None:
    data = b"\xff\xfe " + KEY.encode() + b" \x80"
    out = scrubber.scrub_bytes(data)
    assert KEY.encode() not in out
    assert out.startswith(b"\xff\xfe ")
    assert out.endswith(b" \x80")
    assert scrubber.scrub_bytes(b"\xffplain") == b"\xffplain"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("GET https://g.example/v1/models?key=AbCdEf123456&alt=json", "AbCdEf123456"),
        ("url: http://h/x?foo=1&api_key=zzzSECRETzzz", "zzzSECRETzzz"),
        ("http://h/x?API_KEY=UPPERsecret99", "UPPERsecret99"),
        ("http://h/x;access_token=tok-998877", "tok-998877"),
        ("Authorization: Bearer abc.def.ghi-123456", "abc.def.ghi-123456"),
        ("headers x-api-key: plain-header-secret", "plain-header-secret"),
        ("Cookie: session=abc123; theme=dark", "session=abc123"),
        ("set-cookie: sid=987654321; Path=/", "sid=987654321"),
        ("{'x-goog-api-key': 'goog-secret-1'}", "goog-secret-1"),
        ('{"api_key": "json-field-secret", "model": "m"}', "json-field-secret"),
        ("sent with Bearer eyJhbGciOi.J9x8y7", "eyJhbGciOi.J9x8y7"),
        ("key sk-proj-AbCdEfGhIjKlMnOpQrSt1234 leaked", "sk-proj-AbCdEfGhIjKlMnOpQrSt1234"),
        ("sk-ant-api03-AbCdEfGhIjKlMnOpQrSt-_99", "sk-ant-api03-AbCdEfGhIjKlMnOpQrSt-_99"),
        ("AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ],
)
def test_secrets_by_shape_without_registration(text: str, secret: str) -> None:
    out = Scrubber().scrub_text(text)
    assert secret not in out
    assert FILTERED in out


@pytest.mark.parametrize(
    "text",
    [
        "1. Basic Instinct (1992)\n2. The Key Man\n3. Token of Love\n4. Bearer of Bad News",
        "tokens: 1,234 prompt + 5,678 completion; cost $0.42",
        "tests/test_fairness.py::test_gender passed; key findings below",
        "https://example.org/movies?page=2&sort=year",
        "The Password (2019); Secret Window; Cookie's Fortune; Authorization Code",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Scrubber(["unrelated-secret-value"]).scrub_text(text) == text


def test_short_values_are_not_registered() -> None:
    s = Scrubber(["test", "", None, "  abc  "])
    assert s.values == frozenset()
    assert s.scrub_text("test_fairness.py abc") == "test_fairness.py abc"


def test_one_str_is_refused() -> None:
    with pytest.raises(TypeError, match="wrap it"):
        Scrubber(KEY)


def test_headers(scrubber: Scrubber) -> None:
    out = scrubber.scrub_headers(
        [
            ("Authorization", "Bearer whatever"),
            ("X-Custom-Api-Key", "custom"),
            ("x-session-token", "tok"),
            ("content-type", "application/json"),
            ("x-echo", f"echo {KEY}"),
        ]
    )
    assert out == [
        ("Authorization", FILTERED),
        ("X-Custom-Api-Key", FILTERED),
        ("x-session-token", FILTERED),
        ("content-type", "application/json"),
        ("x-echo", f"echo {FILTERED}"),
    ]


def test_json_values(scrubber: Scrubber) -> None:
    body = {
        "model": f"gpt-x {KEY}",
        "error": {"message": f"bad key {KEY}", "api_key": "anything", "code": 401},
        "list": [KEY, 3, None, {"token": "t"}],
        "tuple": (KEY,),
    }
    out = scrubber.scrub_json(body)
    assert KEY not in json.dumps(out, default=list)
    assert out["error"]["api_key"] == FILTERED
    assert out["error"]["code"] == 401
    assert out["list"][1:3] == [3, None]
    assert out["list"][3] == {"token": FILTERED}
    assert isinstance(out["tuple"], tuple)


def test_process_wide_registry() -> None:
    value = "process-wide-secret-4711"
    secrets.register([value, None])
    assert value in secrets.registered()
    assert secrets.scrub(f"x {value} y") == f"x {FILTERED} y"
    assert secrets.scrub_bytes(value.encode()) == FILTERED.encode()
    assert secrets.scrub_json([value]) == [FILTERED]
    assert secrets.scrub_headers([("x", value)]) == [("x", FILTERED)]


@pytest.mark.parametrize(
    "text",
    [
        "{'key': 'PLANTEDsecret123'}",
        "{'password': 'PLANTEDsecret123'}",
        "{'client_secret': 'PLANTEDsecret123'}",
    ],
)
def test_a_printed_python_dict_is_scrubbed(scrubber: Scrubber, text: str) -> None:
    """Single-quoted credential fields (a dict's repr in a log line): the pre-check once
    knew them only double-quoted, so the rule that removes them never ran."""
    assert "PLANTEDsecret123" not in scrubber.scrub_text(text)


def test_the_pre_check_finds_every_hint_in_any_case_re_would_match() -> None:
    """The pre-check (substring tests on case-folded text) may only skip text no rule can
    match: every character re's ignore-case matches to a letter of a hint, put in its
    place, still finds the hint."""
    import re
    import sys

    every = "".join(map(chr, range(sys.maxunicode + 1)))
    hints = secrets._SHAPE_HINTS
    letters = sorted({c for h in hints for c in h})
    for x in letters:
        pattern = re.compile("(?i)" + re.escape(x))
        variants = set(pattern.findall(every))
        assert x in variants
        for hint in (h for h in hints if x in h):
            for v in variants:
                swapped = hint.replace(x, v)
                assert secrets.may_hold_shape(f"text {swapped} text"), (hint, hex(ord(v)))
    assert not secrets.may_hold_shape("1. Inception (2010)\n2. The Prestige (2006)")


def test_a_short_text_scrubbed_before_is_scrubbed_again_after_a_new_value() -> None:
    """Short texts are remembered scrubbed (titles repeat): a value registered later must
    still be removed from a text remembered before it."""
    s = Scrubber()
    text = "The film is PLANTEDvalue99"
    assert s.scrub_text(text) == text
    s.add(["PLANTEDvalue99"])
    assert "PLANTEDvalue99" not in s.scrub_text(text)
    long = "x" * 300 + " PLANTEDvalue99"
    assert "PLANTEDvalue99" not in s.scrub_text(long)
