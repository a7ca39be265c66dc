"""Atomic writes: whole files only, with the modes a plain open() would give."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_recfair.fileio import atomic_write_text, staged_folder


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
