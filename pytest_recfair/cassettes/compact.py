"""The two cassette file formats (``.json``, ``.json.gz``) and conversion between them. The
gzip is written with ``mtime`` 0, so the same interactions always give the same bytes (git
sees no change); it is about 1/13 of the plain size. A saved file keeps its format."""

from __future__ import annotations

import contextlib
import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytest_recfair.errors import CassetteError
from pytest_recfair.fileio import atomic_write_bytes, remove_stale_temps
from pytest_recfair.secrets import scrub_values_bytes

PLAIN: Final = ".json"
COMPACT: Final = ".json.gz"
# Level 9: cassettes are written rarely (recording, conversion) and read on every run.
_LEVEL: Final = 9


def is_compact(path: Path) -> bool:
    return path.name.endswith(COMPACT)


def plain_name(path: Path) -> str:
    """The ``.json`` name of a cassette in either format (the old per-test layout and
    the conversion use it)."""
    name = path.name
    return name[: -len(".gz")] if name.endswith(COMPACT) else name


def read_text(path: Path) -> str:
    """The cassette's JSON text, whichever format. FileNotFoundError passes through; a
    broken gzip file raises OSError, text that is not UTF-8 UnicodeDecodeError."""
    data = path.read_bytes()
    if is_compact(path):
        # One member by zlib alone (gzip's copies input and output again and checks the CRC in
        # a pass of its own: a third slower); several members, padding, damage: gzip's errors.
        unzip, whole = zlib.decompressobj(31), b""
        with contextlib.suppress(zlib.error):
            whole = unzip.decompress(data)
        if unzip.eof and not unzip.unused_data:
            return whole.decode("utf-8")
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            what = "complete gzip" if data.startswith(b"\x1f\x8b") else "gzip"
            raise OSError(f"not a {what} file: {exc}") from None
    return data.decode("utf-8")


def write(path: Path, text: str) -> None:
    """``text`` into ``path`` in that path's format, temp-then-rename; secret values are
    scrubbed from the text itself (compressed bytes could not be scrubbed afterwards)."""
    data = scrub_values_bytes(text.encode("utf-8"))
    if is_compact(path):
        data = gzip.compress(data, compresslevel=_LEVEL, mtime=0)
    atomic_write_bytes(path, data)


def cassette_files(root: Path) -> list[Path]:
    """The cassette files directly in ``root`` (both formats; no hidden files)."""
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name.endswith((PLAIN, COMPACT))
    )


@dataclass
class Conversion:
    """What ``convert`` did: files converted, bytes before and after, files left alone."""

    converted: list[Path] = field(default_factory=list)
    before: int = 0
    after: int = 0
    skipped: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # unreadable: left as they are
    leftovers: int = 0  # temp files of an interrupted earlier run, removed

    def lines(self, compact: bool) -> list[str]:
        verb = "compacted" if compact else "expanded"
        ratio = f" (x{self.before / self.after:.1f})" if compact and self.after else ""
        out = [
            f"{verb} {len(self.converted)} cassette(s): {self.before / 1e6:.2f} MB -> "
            f"{self.after / 1e6:.2f} MB{ratio}"
        ]
        out += [f"  left as is: {why}" for why in self.skipped]
        if self.leftovers:
            out.append(f"  removed {self.leftovers} temp file(s) of an interrupted earlier run")
        out += [
            f"  DAMAGED, left as is: {why}; restore it (git checkout) or re-record that entity"
            for why in self.damaged
        ]
        return out


def _holds(path: Path, text: str) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return read_text(path) == text
    return False


def convert(root: Path, *, compact: bool) -> Conversion:
    """Every cassette in ``root`` written in the other format, the same JSON text byte for
    byte; the old file is removed only once the new one reads back identical."""
    if not root.is_dir():
        raise CassetteError(
            f"cassette folder {root} does not exist; give the folder holding the "
            "<entity>.json cassettes (recfair_cassette_dir, fixtures/cassettes by default)."
        )
    done = Conversion(leftovers=remove_stale_temps(root))
    for path in cassette_files(root):
        if is_compact(path) == compact:
            continue
        target = root / (f"{path.name}.gz" if compact else plain_name(path))
        try:
            text = read_text(path)
            data = json.loads(text)
        except (OSError, ValueError) as exc:  # one damaged file stops no other
            what = "cannot be read" if isinstance(exc, OSError) else "not JSON"
            what = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else what
            done.damaged.append(f"{path.name}: {what} ({exc})")
            continue
        if not (isinstance(data, dict) and isinstance(data.get("interactions"), list)):
            done.skipped.append(f"{path.name}: not a vcrpy cassette")
            continue
        if not target.exists():
            write(target, text)
            if not _holds(target, text):  # pragma: no cover - a disk that lies
                target.unlink(missing_ok=True)
                raise CassetteError(f"{target} did not read back as written; {path} is kept.")
        elif not _holds(target, text):  # the same text: a run stopped between its rename
            done.skipped.append(f"{path.name}: {target.name} exists too; delete one of them")
            continue  # and the old file's removal, finished here
        done.before += path.stat().st_size
        done.after += target.stat().st_size
        path.unlink()
        done.converted.append(target)
    return done
