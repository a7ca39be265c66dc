"""The replay fast path: every case the cassettes answer is served before any worker or
HTTP client exists (httpx's client machinery cost more than the lookup and parse together).
"""

from __future__ import annotations

import asyncio
import json.encoder
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from pytest_recfair.cassettes import failures
from pytest_recfair.cassettes.miss import CassetteMiss
from pytest_recfair.cassettes.vcrfile import RecordedResponse, Reply
from pytest_recfair.errors import ProviderError, RecfairError
from pytest_recfair.providers.adapter import CallableProvider
from pytest_recfair.providers.base import Completion, Provider, RecordedReply
from pytest_recfair.providers.http import HTTPProvider
from pytest_recfair.providers.pipeline import output_request
from pytest_recfair.providers.retry import Abort, Retryable, judge
from pytest_recfair.providers.runstate import CaseLike, Run, RunOptions
from pytest_recfair.providers.transport import CassetteTransport, response_of

#: A case left for the workers, with the retryable failure its replayed reply gave.
Todo = tuple[CaseLike, Retryable | None]

# The replay pass hands the event loop back this often, so it does not starve other tasks.
_REPLAY_YIELD_EVERY = 256

# A built-in provider's key body has the prompt once, verbatim, as a JSON string, so a
# case's body is its system's body with this slot swapped for the prompt, both encoded by
# the one function the JSON encoder uses for strings: the same text, not re-encoded whole.
_SLOT = "\x00recfair prompt\x00"
_STR = json.encoder.encode_basestring


async def first_pass(
    prov: Provider | CallableProvider, cases: Sequence[CaseLike], opts: RunOptions, run: Run
) -> list[Todo]:
    """Serve what the cassettes hold (no network); the rest is left for the workers."""
    cassettes = opts.cassettes
    if isinstance(prov, CallableProvider) or cassettes is None or not cassettes.policy.replays:
        return [(case, None) for case in cases]
    cassettes.add_secrets(getattr(prov, "secrets", ()))
    replayer = CassetteTransport(cassettes, test_id=opts.test_id)
    return await _replay_pass(prov, cases, replayer, run)


def replay_failures(opts: RunOptions) -> failures.FailureLog | None:
    """In a replay-only run, the failures its recordings noted (read once per run)."""
    store = opts.cassettes
    if store is None or store.policy.records:
        return None
    log = failures.log_for(store.root)
    return log if log.count() else None


def noted_failure(
    prov: CallableProvider, case: CaseLike, test_id: str, log: failures.FailureLog | None
) -> str | None:
    """The error ``log`` holds for ``case`` of a Python recommender (not called again)."""
    noted = None if log is None else log.find(_failure_key(prov, case, test_id))
    return None if noted is None else noted.message()


def remember_failures(
    provider: Provider | CallableProvider,
    cases: Sequence[CaseLike],
    errors: Mapping[str, str],
    root: Path,
    test_id: str,
) -> None:
    """Note ``errors`` (case id -> error) of ``test_id``'s recording beside the cassettes in
    ``root`` (status and kind only), so a replay fails the same prompts; forget the rest."""
    failed = [
        (_failure_key(provider, c, test_id), failures.failure_of(errors[c.id], c.entity_id))
        for c in cases
        if c.id in errors
    ]
    answered = [_failure_key(provider, c, test_id) for c in cases if c.id not in errors]
    failures.log_for(root).update(failed, answered)


def _failure_key(
    provider: Provider | CallableProvider, case: CaseLike, test_id: str | None = None
) -> str:
    """The note key of ``case`` failed by ``test_id`` (None: unscoped, as older notes)."""
    key_of = getattr(provider, "replay_key", None)
    key: tuple[str, str, str | bytes] | None = key_of(case.system, case.prompt) if key_of else None
    if isinstance(provider, CallableProvider):
        key = output_request(provider.model, case.system, case.prompt)
    if key is not None:
        found = failures.request_key(*key, case.repeat)
    else:
        assert not isinstance(provider, CallableProvider)
        request = provider.build_request(case.system, case.prompt)
        found = failures.request_key(request.method, str(request.url), request.content, case.repeat)
    return found if test_id is None else failures.scoped(found, test_id)


async def _replay_pass(
    provider: Provider, cases: Sequence[CaseLike], replayer: CassetteTransport, run: Run
) -> list[Todo]:
    """Serve every case the cassettes answer; return the rest (to record, or to retry
    with its failure). A prompt that failed while recording fails again; any other miss
    stops the run, counted."""
    pass_ = _Pass(provider, replayer, run)
    for done, case in enumerate(cases, 1):
        pass_.case(case)
        if done % _REPLAY_YIELD_EVERY == 0:
            await asyncio.sleep(0)
    pass_.misses.raise_first(len(cases))
    return pass_.rest


class _Pass:
    """One replay pass's state."""

    def __init__(self, provider: Provider, replayer: CassetteTransport, run: Run) -> None:
        self.provider = provider
        self.replayer = replayer
        self.run = run
        self.rest: list[Todo] = []
        self.live_only: dict[str, bool] = {}
        self.misses = _Misses(replayer.store.root)
        self.bodies: dict[str | None, tuple[str, str, str, str] | None] = {}
        # a built-in's parse_reply reads a recording as stored
        self.parse = provider.parse_reply if isinstance(provider, HTTPProvider) else None
        # a recording's headers as parse_reply reads them, per distinct headers
        self.headers: dict[tuple[tuple[str, str], ...], dict[str, str] | None] = {}

    def case(self, case: CaseLike) -> None:
        provider, replayer, run = self.provider, self.replayer, self.run
        skip = self.live_only.get(case.entity_id)
        if skip is None:
            skip = self.live_only[case.entity_id] = replayer.live_only(case.entity_id)
        if skip:  # recording a new cassette: no request to build twice
            self.rest.append((case, None))
            return
        noted = self.misses.noted(provider, case, replayer)
        if noted is not None:  # this test's recording failed it: so does its replay
            run.finish(case, noted.message())
            return
        try:
            response = self.replayed(case)
        except CassetteMiss as miss:
            failed = self.misses.failed(miss, _failure_key(provider, case))
            if failed is not None:
                run.finish(case, failed)
            return
        if response is None:
            self.rest.append((case, None))
            return
        run.requests += 1
        result: Completion | str
        try:
            result = self.judged(response, case)
        except Retryable as exc:
            self.rest.append((case, exc))
            return
        except ProviderError as exc:
            result = str(exc)
        except RecfairError as exc:
            raise Abort(exc) from None
        run.finish(case, result)

    def key(self, case: CaseLike) -> tuple[str, str, str] | None:
        """``provider.replay_key`` of ``case``, from its system's body with a slot."""
        system, provider = case.system, self.provider
        if system not in self.bodies:
            self.bodies[system] = None
            # the base method: None for a subclass, which may build its body otherwise
            if isinstance(provider, HTTPProvider) and (
                key := HTTPProvider.replay_key(provider, system, _SLOT)
            ):
                parts = key[2].split(_STR(_SLOT))
                # a second slot: the one found was the prompt's (not the system's)
                other = HTTPProvider.replay_key(provider, system, _SLOT[::-1])
                if len(parts) == 2 and other == (*key[:2], _STR(_SLOT[::-1]).join(parts)):
                    self.bodies[system] = (key[0], key[1], parts[0], parts[1])
        found = self.bodies[system]
        if found is None:
            key_of = getattr(provider, "replay_key", None)
            return key_of(system, case.prompt) if key_of is not None else None
        method, url, head, tail = found
        return method, url, head + _STR(case.prompt) + tail

    def replayed(self, case: CaseLike) -> httpx.Response | Reply | None:
        """The recorded reply to ``case``, or None when it is to be recorded live. A
        built-in provider's is looked up by key, unbuilt: the httpx objects took half of a
        replayed case."""
        key = self.key(case)
        try:
            if key is not None:
                return self.replayer.find(*key, case.entity_id, case.repeat, case.id, case)
            request = self.run.request(self.provider, case)
            response = self.replayer.replay(request)
        except CassetteMiss:
            raise  # the pass counts misses and replays recorded failures
        except RecfairError as exc:
            raise Abort(exc) from None
        if response is not None:
            response.request = request
            response.read()
        return response

    def judged(self, replayed: httpx.Response | Reply, case: CaseLike) -> Completion:
        """``judge`` of a replayed reply: parsed as stored when replayed by key; if that
        fails, judged as a response with its request, so the words are a live reply's."""
        provider = self.provider
        if isinstance(replayed, tuple):
            status, reason, headers, text = replayed
            if 200 <= status < 300 and self.parse is not None:
                if headers not in self.headers:
                    self.headers[headers] = _reply_headers(headers)
                found = self.headers[headers]
                if found is not None:
                    try:  # a try, not contextlib.suppress: no context manager built per case
                        return self.parse(RecordedReply(text, found))
                    except Exception:  # judged again below, URL and all
                        pass
            replayed = response_of(RecordedResponse(status, headers, text.encode("utf-8"), reason))
            replayed.request = self.run.request(provider, case)
            replayed.read()
        return judge(provider, replayed, case)


class _Misses:
    """The misses of one replay pass: recorded failures replayed, the rest counted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log: failures.FailureLog | None = None
        self.first: CassetteMiss | None = None
        self.count = 0
        self.any_noted: bool | None = None  # the log is read once per pass: counted once

    def noted(
        self, provider: Provider, case: CaseLike, replayer: CassetteTransport
    ) -> failures.Failure | None:
        """In a replay-only run, this test's recording's note of ``case`` (even if another
        test's recording answered the prompt)."""
        if replayer.store.policy.records:
            return None
        if self.any_noted is None:
            self.any_noted = self._log().count() > 0
        if not self.any_noted:
            return None
        return self._log().find(_failure_key(provider, case, replayer.test_id))

    def _log(self) -> failures.FailureLog:
        if self.log is None:
            self.log = failures.log_for(self.root)
        return self.log

    def failed(self, miss: CassetteMiss, key: str) -> str | None:
        """The error of a prompt that failed while recording (a note written before notes
        were per test), or None (a true miss)."""
        noted = self._log().find(key)
        if noted is not None:
            return noted.message()
        self.first = self.first or miss
        self.count += 1
        return None

    def raise_first(self, asked: int) -> None:
        if self.first is not None:
            raise Abort(self.first.counted(self.count, asked))


def _reply_headers(recorded: tuple[tuple[str, str], ...]) -> dict[str, str] | None:
    """A recording's headers as ``parse_reply`` reads them; None unless they read exactly
    as the response's would (in ASCII, as httpx keeps them)."""
    headers: dict[str, str] = {}
    for name, value in recorded:
        if not (name.isascii() and value.isascii()):
            return None
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers
