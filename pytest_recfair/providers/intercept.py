"""vcrpy interception of a pipeline's HTTP calls, for code that cannot be handed
``recfair_http_client`` (a client built deep inside, ``requests``, ``aiohttp``):
``@fairness(intercept="vcr")`` / ``recfair_intercept = vcr``.

vcrpy patches process-wide, so the audit runs one prompt at a time, each with a vcrpy
cassette whose persister reads that prompt's recordings from its entity's cassette and
hands what vcrpy recorded to the prompt's :class:`~.pipeline.Scope`. A request vcrpy
cannot play is the scope's miss or a live request counted against the budget. Libraries
vcrpy does not patch (httpx2, today's openai and anthropic SDKs) are not seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import vcr
from vcr.cassette import Cassette
from vcr.persisters.filesystem import CassetteNotFoundError
from vcr.request import Request

from pytest_recfair.providers.pipeline import Scope, current

_VCR = vcr.VCR(decode_compressed_response=True)
_MATCH_ON = ("method", "host", "path", "body")


class _Persister:
    """vcrpy's storage, for one prompt: its scope's entity cassette."""

    @staticmethod
    def load_cassette(cassette_path: str, serializer: Any) -> tuple[list[Any], list[Any]]:
        scope = current()
        if scope is None or not scope.store.policy.replays:
            raise CassetteNotFoundError
        requests, responses = [], []
        for _, key, reply in scope.store.recorded(scope.entity, scope.case.id):
            method, host, path, body, _ = key
            code, reason, headers, text = reply
            requests.append(Request(method, f"https://{host}{path}", body, {}))
            grouped: dict[str, list[str]] = {}
            for name, value in headers:
                grouped.setdefault(name, []).append(value)
            responses.append(
                {
                    "status": {"code": code, "message": reason},
                    "headers": grouped,
                    "body": {"string": text.encode("utf-8")},
                }
            )
        if not requests:
            raise CassetteNotFoundError
        scope.vcr_loaded = len(requests)
        return requests, responses

    @staticmethod
    def save_cassette(cassette_path: str, cassette_dict: dict[str, Any], serializer: Any) -> None:
        scope = current()
        if scope is None:
            return
        pairs = list(zip(cassette_dict["requests"], cassette_dict["responses"], strict=True))
        for request, response in pairs[scope.vcr_loaded :]:
            _hand(scope, request, response)


def _hand(scope: Scope, request: Any, response: dict[str, Any]) -> None:
    """A reply vcrpy got live, handed to the prompt's scope (kept if a 2xx)."""
    body = _body(request)
    content = response["body"]["string"]
    scope.vcr_answered(request.method, request.uri, body)
    scope.keep(
        request.method,
        request.uri,
        [(str(n), str(v)) for n, v in request.headers.items()],
        body,
        int(response["status"]["code"]),
        [(n, v) for n, vs in response["headers"].items() for v in _values(vs)],
        content if isinstance(content, bytes) else str(content or "").encode("utf-8"),
        str(response["status"].get("message") or ""),
    )


def _body(request: Any) -> bytes:
    body = request.body or b""
    return body if isinstance(body, bytes) else str(body).encode("utf-8")


def _values(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


class _Cassette(Cassette):  # type: ignore[misc]  # vcrpy ships no type hints
    """A vcrpy cassette that tells the scope about each request it cannot play (before
    vcrpy raises its own miss or sends it live)."""

    def can_play_response_for(self, request: Any) -> bool:
        playable = bool(super().can_play_response_for(request))
        scope = current()
        if not playable and scope is not None:
            scope.unplayable(request, request.method, request.uri, _body(request))
        return playable

    def append(self, request: Any, response: dict[str, Any]) -> None:
        """A non-2xx reply goes to the scope (its request failed) and not into vcrpy's
        cassette, which would answer the pipeline's retry with it instead of sending it."""
        scope = current()
        if scope is not None and not 200 <= int(response["status"]["code"]) < 300:
            _hand(scope, request, response)
            return
        super().append(request, response)


@contextlib.contextmanager
def intercepted(scope: Scope) -> Iterator[None]:
    """vcrpy's patches for the duration of one prompt, recording into ``scope``."""
    policy = scope.store.policy
    mode = ("new_episodes" if policy.replays else "all") if policy.records else "none"
    config = _VCR.get_merged_config(
        path=f"recfair-{scope.entity}",
        persister=_Persister,
        record_mode=mode,
        match_on=_MATCH_ON,
        allow_playback_repeats=False,
    )
    with _Cassette.use(**config):
        yield
    scope.vcr_done()  # after vcrpy saved what it recorded into the scope
