"""Cassettes not written by the current store, read through vcrpy's own loader.

Two kinds: the per-test layout of earlier pytest-recfair versions
(``<root>/<sanitised test id>/<entity>.json``) and cassettes a team recorded with vcrpy
or pytest-recording (YAML or JSON, any layout). vcrpy parses them
(``vcr.persisters.filesystem.FilesystemPersister`` with its YAML or JSON serializer),
undoes compressed bodies (``vcr.filters.decode_response``), and each interaction is
handed to :class:`~pytest_recfair.cassettes.store.CassetteStore` in the store's own JSON form,
so both are matched like native cassettes.

:class:`CompactPersister` is the other direction: it lets vcrpy itself (and
pytest-recording) read and write the compact ``.json.gz`` cassettes of
:mod:`pytest_recfair.cassettes.compact` (``my_vcr.register_persister(CompactPersister)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_recfair.cassettes import compact
from pytest_recfair.errors import CassetteError

__all__ = ["VCR_SUFFIXES", "CompactPersister", "legacy_dirs", "read_vcr", "vcr_files"]

#: File suffixes read as vcrpy cassettes (the serializer follows the suffix).
VCR_SUFFIXES = (".json", ".yaml", ".yml")


class CompactPersister:
    """A vcrpy persister (``VCR.register_persister``) for cassettes in either of our
    formats: ``.json.gz`` files are gunzipped on load and gzipped on save (the same
    bytes the store writes), anything else is read and written as vcrpy's own
    ``FilesystemPersister`` does. Use it with ``serializer="json"``."""

    @classmethod
    def load_cassette(cls, cassette_path: str | Path, serializer: Any) -> Any:
        from vcr.persisters.filesystem import CassetteDecodeError, CassetteNotFoundError
        from vcr.serialize import deserialize

        path = Path(cassette_path)
        try:
            text = compact.read_text(path)
        except FileNotFoundError:
            raise CassetteNotFoundError() from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CassetteDecodeError(f"cannot read cassette {path}: {exc}") from None
        if not text.strip():
            raise CassetteNotFoundError()  # as vcrpy: an empty file is recorded again
        return deserialize(text, serializer)

    @staticmethod
    def save_cassette(cassette_path: str | Path, cassette_dict: Any, serializer: Any) -> None:
        from vcr.serialize import serialize

        compact.write(Path(cassette_path), serialize(cassette_dict, serializer))


def legacy_dirs(root: Path) -> tuple[Path, ...]:
    """The folders of the old per-test layout under ``root`` (``<root>/<test>/``)."""
    if not root.is_dir():
        return ()
    # Hidden folders are not tests' (the parse cache, .recfair_cache, lives there).
    return tuple(sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")))


def vcr_files(paths: tuple[Path, ...]) -> Iterator[Path]:
    """Every cassette file under ``paths`` (files as given; folders searched recursively)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.suffix in VCR_SUFFIXES or p.name.endswith(compact.COMPACT)
            )
        elif path.is_file():
            yield path
        else:
            raise CassetteError(
                f"vcrpy cassette path {path} does not exist; fix recfair_vcr_cassettes (a "
                "list of cassette files or folders) or remove the entry."
            )


def read_vcr(path: Path) -> list[dict[str, Any]]:
    """The interactions of a vcrpy cassette, in the store's JSON form (text bodies)."""
    # Imported here: a run with only native cassettes never pays for importing vcrpy.
    from vcr.persisters.filesystem import CassetteNotFoundError
    from vcr.serializers import jsonserializer, yamlserializer

    serializer = yamlserializer if path.suffix in (".yaml", ".yml") else jsonserializer
    try:
        loaded = CompactPersister.load_cassette(path, serializer)
    except CassetteNotFoundError:
        return []
    except Exception as exc:  # vcrpy raises ValueError, yaml and JSON errors alike
        raise CassetteError(
            f"cassette {path} cannot be read by vcrpy ({type(exc).__name__}: {exc}). "
            "Delete it and re-record, or remove it from recfair_vcr_cassettes."
        ) from None
    requests, responses = loaded[0], loaded[1]
    return [_interaction(path, rq, rs) for rq, rs in zip(requests, responses, strict=True)]


def _interaction(path: Path, request: Any, response: Any) -> dict[str, Any]:
    from vcr.filters import decode_response

    response = decode_response(response)
    body = _text(path, request.body)
    return {
        "request": {
            "body": body or None,
            "headers": {k: [v] for k, v in request.headers.items()},
            "method": request.method,
            "uri": request.uri,
        },
        "response": {
            "body": {"string": _text(path, response["body"].get("string"))},
            "headers": {
                k: [v] if isinstance(v, str) else list(v)
                for k, v in (response.get("headers") or {}).items()
            },
            "status": response["status"],
        },
    }


def _text(path: Path, data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise CassetteError(
            f"cassette {path} holds a body that is not UTF-8 text; pytest-recfair replays "
            "JSON APIs only. Remove that interaction or the file."
        ) from None
