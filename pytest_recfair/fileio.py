"""Atomic file writes (a reader never sees a half-written file), the one way input data
files are read (each error one line naming the file), and how the plugin's bulk work runs."""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import logging
import os
import pickle
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.secrets import scrub_values_bytes


def loads(text: str | bytes, *, exact: bool = False) -> Any:
    """``json.loads`` by orjson (a paper-scale replay parses ~85 MB of JSON: 0.47 -> 0.26 s),
    by the stdlib what orjson refuses (NaN, lone surrogates, deep nesting: read as before, or
    the stdlib's error). orjson reads integers beyond 64 bits as floats: ``exact`` sends text
    with a run of 19 digits to the stdlib (off for cassettes and replies, whose only numbers
    are status codes and token counts; a guard costs a third of the parse)."""
    if exact:
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        if _LONG_DIGITS in raw.translate(_TO_NINE):
            return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


_TO_NINE = bytes.maketrans(b"012345678", b"999999999")
_LONG_DIGITS = b"9" * 19  # after _TO_NINE: any run of 19 digits


def read_text(
    path: Path,
    where: str,
    error: type[DataError] = DataError,
    *,
    encoding: str = "utf-8-sig",  # -sig: Excel's BOM is common
) -> str:
    """``path`` decoded; not UTF-8: ``error`` naming the byte and where it is."""
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise error(
            f"{where} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); re-save it as UTF-8"
        ) from exc


def read_input(
    source: str | Path,
    what: str,
    bundled: Iterable[str],
    suffixes: Sequence[str],
    error: type[DataError] = DataError,
) -> tuple[str, str, str]:
    """The one reader of a user's input file (seeds, grid, role-play questions) named by
    a path, not a bundled name: its text, ``<what> file '<path>'`` (how errors name it)
    and its suffix; a wrong suffix or a missing file is a one-line error."""
    path = Path(source)
    suffix, names = path.suffix.lower(), ", ".join(bundled)
    if suffix not in suffixes:
        raise ConfigError(
            f"{what}: {str(source)!r} is neither a bundled set ({names}) nor a file ending in "
            f"{', '.join(suffixes)}; pass one of those"
        )
    if not path.is_file():
        raise error(
            f"{what} file {str(path)!r} does not exist; check the path (relative paths are "
            f"resolved from the current directory) or use a bundled set ({names})"
        )
    where = f"{what} file {str(path)!r}"
    return read_text(path, where, error), where, suffix


def load_structured(
    text: str,
    where: str,
    suffix: str = ".yaml",
    error: type[DataError] = DataError,
    *,
    fast: bool = False,
) -> Any:
    """JSON (``suffix`` .json) or YAML text parsed, else ``error`` on one line; ``fast``:
    libyaml's loader when built in (its errors are worded otherwise)."""
    import yaml  # only where a data file is read

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader
        return json.loads(text) if suffix == ".json" else yaml.load(text, Loader=loader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if suffix == ".json" else "YAML"
        raise error(f"{where} is not valid {kind}: {' '.join(str(exc).split())}") from exc


def csv_rows(
    text: str, where: str, column: Callable[[str], str | None], need: set[str], expected: str
) -> list[tuple[str, dict[str, str]]]:
    """The non-empty rows of a user's CSV file (seeds, role-play questions) as
    (``line N``, {``column(header)``: stripped cell}); ``column`` None drops a column. A
    header without the ``need`` columns or a row longer than it is a one-line error."""
    reader = csv.DictReader(io.StringIO(text))
    header = [f or "" for f in reader.fieldnames or []]
    names = {f: column(f) for f in header}
    missing = sorted(need - set(names.values()))
    if missing:
        raise DataError(
            f"{where}: line 1: the header lacks column(s) {missing}; expected {expected}; "
            f"found {header or '(no header)'}"
        )
    rows = []
    for raw in reader:
        line = f"line {reader.line_num}"
        if None in raw:
            raise DataError(
                f"{where}: {line} has more fields than the header ({len(header)} columns); "
                "quote fields that contain commas"
            )
        row = {n: v.strip() for c, v in raw.items() if (n := names[c]) and v and v.strip()}
        if row:
            rows.append((line, row))
    return rows


@lru_cache(maxsize=4)
def _validator(name: str) -> Any:
    import jsonschema  # only where a data file is read

    node = resources.files("pytest_recfair").joinpath("schemas", f"{name}.schema.json")
    return jsonschema.Draft202012Validator(json.loads(node.read_text(encoding="utf-8")))


def check_shape(
    data: Any,
    name: str,
    where: str,
    expected: str,
    error: type[DataError] = DataError,
    rows: Sequence[str] = (),
) -> None:
    """The input files' one bad-shape message: ``data``'s first problem against
    ``schemas/<name>.schema.json`` (an anyOf's deepest cause) as ``<where>: at <key path>:
    <problem>; <expected>``; ``rows`` name the top-level list's items (a CSV's ``line 3``)."""
    found = _validator(name).iter_errors(data)
    errors = sorted(found, key=lambda e: (list(map(str, e.path)), e.message))
    if not errors:
        return
    err = errors[0]
    while err.context:
        err = sorted(err.context, key=lambda e: -len(e.path))[0]
    path = list(err.absolute_path)
    if rows and len(path) > 1 and isinstance(path[1], int):
        path = [rows[path[1]], *path[2:]]
    # the key path: attributes[1].values[0]
    at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).removeprefix(".")
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    raise error(f"{where}: at {at or '(top level)'}: {err.message}{more}; {expected}")


def _umask() -> int:
    """From /proc: os.umask can only set it, racing with other threads creating files."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """``data`` to a temp file beside ``path``, fsynced, renamed over it; registered secret
    values (API keys) never reach a file, whatever wrote them."""
    data = scrub_values_bytes(data)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid in the name: a killed writer's temp file is told from a live one's
    prefix = f".{target.name}.{os.getpid()}."
    try:  # an existing file's mode, else what open() would give (not mkstemp's private 0600)
        mode = target.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_TEMP = re.compile(r"\..+\.(\d+)\.\w+\.tmp")


def remove_stale_temps(folder: Path) -> int:
    """Remove the temp files in ``folder`` whose writer was killed before its rename."""
    removed = 0
    for tmp in folder.glob(".*.tmp") if os.name == "posix" else ():
        match = _TEMP.fullmatch(tmp.name)
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists (POSIX)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A hidden folder next to ``out``, moved to ``out`` (new or empty) when the block
    succeeds, removed when it fails: a failed write leaves ``out`` as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # what mkdir would give it, not mkdtemp's 0700
        yield tmp
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_FROZEN: list[bool] = []  # non-empty while bulk_work holds the collector
_ONE_BLAS: list[bool] = []  # non-empty while bulk_work holds BLAS to one thread


@contextlib.contextmanager
def bulk_work() -> Iterator[None]:
    """The plugin's bulk work (its imports, an audit, a paper-scale baseline). The cyclic
    collector walked the same long-lived objects ~15% of a replay (an audit allocates
    millions of small acyclic ones, its imports ~100,000 long-lived ones): frozen and the
    threshold raised. BLAS on one thread once numpy is loaded: (B, E) x (E, V) products
    this small cost more CPU on two threads than on one, and their last digits followed
    the thread count. Both restored after (docs/performance.md). Re-entrant."""
    with contextlib.ExitStack() as stack:
        if not _ONE_BLAS and "numpy" in sys.modules:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(1, user_api="blas"))
            _ONE_BLAS.append(True)
            stack.callback(_ONE_BLAS.pop)
        if not _FROZEN:
            old = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(old[0], 50_000), *old[1:])
            _FROZEN.append(True)
            stack.callback(gc.unfreeze)
            stack.callback(gc.set_threshold, *old)
            stack.callback(_FROZEN.pop)
        yield


class Child:
    """``work`` run in a forked copy of this process, its value (pickled), warnings and log
    records read back: a second core for a long replay. Any failure of the fork or the child
    (an exception, a crash, no answer by the deadline: killed) gives ``None``."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._pid, (self._read, write) = 0, os.pipe()
        try:
            with warnings.catch_warnings():  # 3.12+ warns of a fork beside threads (ours:
                warnings.simplefilter("ignore", DeprecationWarning)  # none the child uses)
                self._pid = os.fork()
        except OSError:  # no process to spare
            os.close(write)
            self.stop()
            return
        if self._pid == 0:  # the child: runs no exit handler, flushes nothing
            code = 1
            try:
                os.close(self._read)
                import logging.handlers  # (here: only a child needs it)

                logging.getLogger().addHandler(kept := logging.handlers.BufferingHandler(2**62))
                with warnings.catch_warnings(record=True) as warned:  # under the same filters
                    value = work()
                said = [(str(w.message), w.category, w.filename, w.lineno) for w in warned]
                for r in kept.buffer:  # as text: their arguments may not pickle
                    r.msg, r.args, r.exc_info = r.getMessage(), None, None
                with os.fdopen(write, "wb") as out:
                    pickle.dump((value, said, kept.buffer), out, pickle.HIGHEST_PROTOCOL)
                code = 0
            finally:
                os._exit(code)
        os.close(write)

    def result(self, timeout: float) -> Any:
        """The child's value, its warnings and log records raised and handled here (None: it
        failed, or had not answered within ``timeout`` s)."""
        parts, got = [], None
        deadline, poll = time.monotonic() + timeout, select.poll()  # (select: fd < 1024 only)
        poll.register(self._read if self._pid else 0, select.POLLIN)
        while self._pid and poll.poll(max(0.0, deadline - time.monotonic()) * 1000):
            if part := os.read(self._read, 1 << 20):
                parts.append(part)
                continue
            if self.stop(wait=True) == 0:  # the end: the child exits
                with contextlib.suppress(Exception):  # (unreadable: None)
                    got = pickle.loads(b"".join(parts))
            break
        self.stop()  # no answer in time: killed
        if got is None:
            return None
        value, said, records = got
        for message, category, filename, lineno in said:
            warnings.warn_explicit(message, category, filename, lineno)
        for record in records:
            logging.getLogger(record.name).handle(record)
        return value

    def stop(self, *, wait: bool = False) -> int:
        """The child's exit code, waited for (``wait``) or killed first if still running."""
        pid, self._pid = self._pid, 0
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        with contextlib.suppress(ChildProcessError):  # (SIGCHLD ignored: reaped already)
            if pid > 0 and not wait:
                os.kill(pid, signal.SIGKILL)  # (an exited child's status stays its own)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) if pid > 0 else -1
        return -1
