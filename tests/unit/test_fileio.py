"""Atomic writes: whole files only, with the modes a plain open() would give; ``loads``
reads what the stdlib reads (but for big integers, unless ``exact``)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_recfair.fileio import atomic_write_text, loads, staged_folder


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_files_respect_the_umask(tmp_path: Path, umask: None) -> None:
    atomic_write_text(tmp_path / "sub" / "report.md", "# ok\n")
    assert _mode(tmp_path / "sub" / "report.md") == 0o640  # 0666 less umask 027
    assert (tmp_path / "sub" / "report.md").read_text() == "# ok\n"


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("{}")
    target.chmod(0o604)
    atomic_write_text(target, '{"a": 1}')
    assert _mode(target) == 0o604
    assert target.read_text() == '{"a": 1}'


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    class Boom(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write_text(tmp_path / "x.json", Boom("x"))
    assert list(tmp_path.iterdir()) == []


def test_a_staged_folder_replaces_an_empty_out_or_leaves_it_as_it_was(
    tmp_path: Path, umask: None
) -> None:
    out = tmp_path / "out"
    out.mkdir()

    def fail() -> None:
        with staged_folder(out) as tmp:
            atomic_write_text(tmp / "a.txt", "half a project")
            raise RuntimeError("the import failed")

    with pytest.raises(RuntimeError, match="the import failed"):
        fail()
    assert sorted(tmp_path.iterdir()) == [out]
    assert list(out.iterdir()) == []
    with staged_folder(out) as tmp:
        atomic_write_text(tmp / "a.txt", "a whole project")
    assert sorted(tmp_path.iterdir()) == [out]
    assert (out / "a.txt").read_text(encoding="utf-8") == "a whole project"
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~0o027


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_loads_reads_what_the_stdlib_reads(value: object) -> None:
    text = json.dumps(value)  # NaN and infinities too: orjson refuses them, the stdlib reads
    assert json.dumps(loads(text, exact=True)) == text  # floats to the last bit
    assert json.dumps(loads(text.encode(), exact=True)) == text
    fits = not any(isinstance(v, int) and not -(2**63) <= v < 2**64 for v in _leaves(value))
    assert (json.dumps(loads(text)) == text) or not fits  # orjson: big integers as floats


def _leaves(value: object) -> list[object]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("text", ['"\\ud800"', "[NaN, Infinity]"])
def test_loads_falls_back_to_the_stdlib_for_what_orjson_refuses(text: str) -> None:
    assert json.dumps(loads(text)) == json.dumps(json.loads(text))


def test_too_deep_nesting_fails_as_the_stdlib_fails() -> None:
    with pytest.raises(RecursionError):  # orjson refuses past 1,024 levels; the stdlib fails
        loads("[" * 2000 + "]" * 2000)


def test_exact_loads_keeps_integers_beyond_64_bits() -> None:
    text = f'{{"seed": {2**70}, "id": "{"7" * 30}"}}'
    assert loads(text, exact=True) == {"seed": 2**70, "id": "7" * 30}
    assert loads(text) == {"seed": float(2**70), "id": "7" * 30}  # what the guard is for


def test_loads_raises_the_stdlib_error_for_bad_json() -> None:
    with pytest.raises(json.JSONDecodeError) as got:
        loads('{"a": 1')
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads('{"a": 1')
    assert str(got.value) == str(expected.value)
