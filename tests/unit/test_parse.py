"""Unit tests for pytest_recfair.replies.parse: corpus, fairllm reference equality, fuzzing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_recfair.errors import ConfigError, RecfairError
from pytest_recfair.replies import parse
from pytest_recfair.replies.parse import ParsedReply, ReplyStatus

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "replies.yaml"


def _load_corpus() -> list[dict[str, Any]]:
    cases = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    assert isinstance(cases, list)
    return cases


_CASES = _load_corpus()


# --------------------------------------------------------------------------------------
# corpus


def test_corpus_is_large_and_varied() -> None:
    assert len(_CASES) >= 40
    assert len({c["id"] for c in _CASES}) == len(_CASES)
    statuses = {c["status"] for c in _CASES}
    assert statuses == {s.value for s in ReplyStatus}
    assert sum(1 for c in _CASES if str(c["source"]).startswith("real:")) >= 4


@pytest.mark.parametrize("case", _CASES, ids=[c["id"] for c in _CASES])
def test_corpus_reply(case: dict[str, Any]) -> None:
    got = parse.reply(case["text"], case["k"])
    assert got.status == ReplyStatus(case["status"])
    assert got.items == case["expected"][: case["k"]]
    assert len(got.items) <= case["k"]


@pytest.mark.parametrize("case", _CASES, ids=[c["id"] for c in _CASES])
def test_corpus_items_unbounded(case: dict[str, Any]) -> None:
    if case["status"] in ("refused", "empty", "unparseable"):
        assert parse.items(case["text"]) == []
    else:
        assert parse.items(case["text"])[: case["k"]] == case["expected"][: case["k"]]


# --------------------------------------------------------------------------------------
# default style details


def test_items_truncates_to_k() -> None:
    text = "1. Jaws\n2. Duel\n3. Hook"
    assert parse.items(text, k=2) == ["Jaws", "Duel"]
    assert parse.items(text, k=10) == ["Jaws", "Duel", "Hook"]


def test_long_reply_reports_found_count() -> None:
    got = parse.reply("1. Jaws\n2. Duel\n3. Hook\n4. Munich", 2)
    assert got == ParsedReply(["Jaws", "Duel"], ReplyStatus.LONG, 4)


@pytest.mark.parametrize(
    "title",
    [
        "Spider-Man: No Way Home",
        "Mission: Impossible",
        "Mission: Impossible - Fallout",
        "X-Men: Days of Future Past",
        "Star Wars: Episode V - The Empire Strikes Back",
        "Birdman",
        "Dr. Strangelove",
        "Ocean's Eleven",
    ],
)
def test_titles_with_colons_and_hyphens_stay_whole(title: str) -> None:
    assert parse.items(f"1. {title}\n2. Heat") == [title, "Heat"]


@pytest.mark.parametrize(
    ("entry", "title"),
    [
        ("Inception (2010)", "Inception"),
        ("Inception [2010]", "Inception"),
        ("Inception, 2010", "Inception"),
        ('"Inception"', "Inception"),
        ("**Inception**", "Inception"),
        ("_Inception_", "Inception"),
        ("Inception by Christopher Nolan", "Inception"),
        ("Inception — Christopher Nolan", "Inception"),
        ("Inception - a heist inside dreams", "Inception"),
        ("Inception: Directed by Christopher Nolan", "Inception"),
        ("Inception (2010): a heist inside dreams.", "Inception"),
        ("**Inception** (2010) - Nolan's best", "Inception"),
    ],
)
def test_entry_cleaning(entry: str, title: str) -> None:
    assert parse.items(f"1. {entry}\n2. Heat") == [title, "Heat"]


def test_refusal_followed_by_no_list_is_refused() -> None:
    text = "I'm sorry, but I can't help with that.\n\nIs there anything else I can do?"
    assert parse.reply(text, 25).status is ReplyStatus.REFUSED


def test_refusal_opening_plain_lines_is_refused() -> None:
    text = "I cannot recommend movies based on religion.\nPlease ask me something else"
    assert parse.reply(text, 25) == ParsedReply([], ReplyStatus.REFUSED, 0)


def test_none_is_empty() -> None:
    assert parse.reply(None, 25) == ParsedReply([], ReplyStatus.EMPTY, 0)
    assert parse.reply("", 25).status is ReplyStatus.EMPTY


def test_status_values_are_strings() -> None:
    assert [s.value for s in ReplyStatus] == [
        "ok",
        "short",
        "long",
        "refused",
        "empty",
        "unparseable",
    ]
    assert ReplyStatus.OK == "ok"


# --------------------------------------------------------------------------------------
# fairllm style: the spec's own examples, then equality with a literal transcription


def test_fairllm_spec_examples() -> None:
    text = "1. Spider-Man: No Way Home (2021)\n2. The Dark Knight"
    assert parse.items(text, style="fairllm") == ["spider", "thedarkknight"]
    assert parse.items("Inception\nMemento", style="fairllm") == []


def test_fairllm_quote_rule_and_k() -> None:
    text = 'Here:\n1. "The Matrix" (1999)\n2. Say "Hi" there\n3. Odd " quote\n4. Four'
    assert parse.items(text, style="fairllm") == ["thematrix", "hi", "oddquote", "four"]
    assert parse.items(text, k=2, style="fairllm") == ["thematrix", "hi"]


def _reference_fairllm(text: str, k: int | None = None) -> list[str]:
    """metrics.md's six steps, written out independently of the implementation."""
    text = text.lower()
    text = text.replace("'", "")
    text = text.replace("\n", "")
    pieces = re.split(r"\d+\. ", text)
    pieces = pieces[1:]
    result = []
    for piece in pieces:
        if "-" in piece:
            piece = piece[: piece.index("-")]
        if '"' in piece:
            quoted = re.findall(r'"(.*?)"', piece)
            piece = quoted[0].strip(" ") if quoted else piece.replace('"', "").strip(" ")
        else:
            piece = piece.strip(" ")
        piece = re.sub(r"\([^)]*\)", "", piece)
        piece = piece.replace(" ", "")
        result.append(piece)
    return result if k is None else result[:k]


_LISTY = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "1. ",
                "2. ",
                "10. ",
                "\n",
                " ",
                "-",
                '"',
                "'",
                "(",
                ")",
                "(2021)",
                ".",
                "\t",
                "\r",
                "The Dark Knight",
                "Spider-Man: No Way Home",
                "É",
                "ß",
            ]
        ),
        st.text(max_size=6),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_LISTY, k=st.one_of(st.none(), st.integers(1, 30)))
def test_fairllm_equals_reference(text: str, k: int | None) -> None:
    assert parse.items(text, k=k, style="fairllm") == _reference_fairllm(text, k)


@pytest.mark.parametrize("case", _CASES, ids=[c["id"] for c in _CASES])
def test_fairllm_equals_reference_on_corpus(case: dict[str, Any]) -> None:
    assert parse.items(case["text"], style="fairllm") == _reference_fairllm(case["text"])


# --------------------------------------------------------------------------------------
# never raises


_MARKUP = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.sampled_from(
            [
                "\n",
                "1. ",
                "#1 ",
                "2) ",
                "- ",
                "* ",
                "• ",
                "**",
                "_",
                "`",
                "```json\n",
                "```",
                "[",
                "]",
                "{",
                "}",
                '"',
                "“",
                ":",
                " - ",
                " — ",
                "|",
                "|---|---|\n",
                "(1999)",
                " by ",
                "I'm sorry",
                "Here are",
                '{"title": ',
            ]
        ),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=300), _MARKUP))
def test_items_never_raises(text: str) -> None:
    for style in ("default", "fairllm"):
        got = parse.items(text, style=style)  # type: ignore[arg-type]
        assert isinstance(got, list)
        assert all(isinstance(t, str) for t in got)
    default = parse.items(text)
    assert all(t and t == t.strip() for t in default)
    assert parse.reply(text, 5).status in set(ReplyStatus)


# --------------------------------------------------------------------------------------
# argument errors


@pytest.mark.parametrize("k", [0, -1, 2.5, "25", True])
def test_bad_k(k: object) -> None:
    with pytest.raises(ConfigError, match="k: expected"):
        parse.items("1. A", k=k)  # type: ignore[arg-type]
    with pytest.raises(RecfairError, match="k: expected"):
        parse.reply("1. A", k)  # type: ignore[arg-type]


def test_reply_needs_k() -> None:
    with pytest.raises(ConfigError, match="positive int"):
        parse.reply("1. A", None)  # type: ignore[arg-type]


def test_bad_style() -> None:
    with pytest.raises(ConfigError, match="style: expected one of default, fairllm"):
        parse.items("1. A", style="langfair")  # type: ignore[arg-type]


def test_bad_text_type() -> None:
    with pytest.raises(TypeError, match="text: expected the reply text as str, got bytes"):
        parse.items(b"1. A")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got int"):
        parse.reply(12, 5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000,  # deeper than the JSON decoder's recursion limit
        "[" + "{" * 5000,
        "1. a" + " " * 5000 + "!",
        "1. x" + "(" * 5000,
        "|" + " " * 5000 + "|\n|" + " " * 5000 + "x",
    ],
    ids=["nested-arrays", "nested-objects", "space-run", "open-parens", "pipe-spaces"],
)
def test_pathological_inputs(text: str) -> None:
    got = parse.reply(text, 5)
    assert got.status in set(ReplyStatus)
    assert all(t == t.strip() and t for t in got.items)


def test_any_line_break_separates_entries() -> None:
    text = "Here:\r\n1. Heat\r\n2. Ronin\u20283. Thief\x0c4. Collateral"
    assert parse.items(text) == ["Heat", "Ronin", "Thief", "Collateral"]
