"""Replies above the size cap are cut with a note; the JSON body stays valid."""

from __future__ import annotations

import json

import pytest

from pytest_recfair.errors import ConfigError
from pytest_recfair.providers import base as replycap
from pytest_recfair.replies import parse
from pytest_recfair.settings import resolve

KEY = "recfair_max_reply_chars"


def test_short_text_is_kept_whole() -> None:
    assert replycap.cut_text("1. A\n2. B", 100) == ("1. A\n2. B", False)


def test_long_text_is_cut_with_a_note_on_its_own_line() -> None:
    text = "".join(f"{i % 999 + 1}. Title {i}\n" for i in range(100_000))
    out, cut = replycap.cut_text(text, 1000)
    assert cut
    assert out.startswith(text[:1000])
    assert f"of {len(text):,} characters" in out
    assert replycap.was_cut(out)
    assert not replycap.was_cut(text)
    # the note is never read as a title, and the first 25 titles are unchanged
    assert parse.reply(out, 25).items == parse.reply(text, 25).items


def test_json_body_strings_are_cut_and_stay_json() -> None:
    reply = "x" * 5000
    body = {
        "id": "abc",
        "choices": [{"message": {"role": "assistant", "content": reply}}],
        "usage": {"prompt_tokens": 3},
    }
    out, n = replycap.cut_json(body, 100)
    assert n == 1
    content = out["choices"][0]["message"]["content"]  # type: ignore[index]
    assert content.startswith("x" * 100)
    assert replycap.was_cut(content)
    assert json.loads(json.dumps(out))["usage"] == {"prompt_tokens": 3}
    assert body["choices"][0]["message"]["content"] == reply  # type: ignore[index]


def test_json_without_long_strings_is_returned_as_is() -> None:
    body = {"a": ["short", 1, None, {"b": "c"}]}
    out, n = replycap.cut_json(body, 100)
    assert n == 0
    assert out is body


@pytest.mark.parametrize("bad", [0, -5, "abc", "1.5", True, None, 2.0])
def test_bad_limit_is_a_one_line_error_naming_the_key(bad: object) -> None:
    # None is "not given" in the ini, so it is given as a marker argument
    given = {"marker": {"max_reply_chars": bad}} if bad is None else {"ini": {KEY: bad}}
    expected = r"^fairness setting (recfair_)?max_reply_chars=.*: expected an integer >= 1"
    with pytest.raises(ConfigError, match=expected) as e:
        resolve(**given)
    assert "\n" not in str(e.value)


def test_limit_from_ini_text() -> None:
    assert resolve(ini={KEY: "200_000"}).max_reply_chars == 200_000
    assert resolve(ini={KEY: " 5000 "}).max_reply_chars == 5000
