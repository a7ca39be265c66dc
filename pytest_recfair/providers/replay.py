"""The replay fast path: every case the cassettes answer is served before any worker or
HTTP client exists (httpx's client machinery cost more than the lookup and parse together)."""

from __future__ import annotations

import asyncio
import functools
import json.encoder
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from pytest_recfair.cassettes.store import CassetteStore

#: A case left for the workers, with the retryable failure its replayed reply gave.
Todo = tuple[CaseLike, Retryable | None]

# A built-in's key body has the prompt once, as a JSON string: a case's body is its system's
# body with this slot swapped for the prompt, both encoded by the JSON encoder's own string
# function: the same text, not re-encoded whole.
_SLOT = "\x00recfair prompt\x00"
_STR = json.encoder.encode_basestring


async def first_pass(
    prov: Provider | CallableProvider, cases: Sequence[CaseLike], opts: RunOptions, run: Run
) -> list[Todo]:
    """Serve what the cassettes hold; the rest is the workers' (to record, or retry with its
    failure). A prompt that failed while recording fails again; any other miss stops the run."""
    cassettes = opts.cassettes
    if isinstance(prov, CallableProvider) or cassettes is None or not cassettes.policy.replays:
        return [(case, None) for case in cases]
    cassettes.add_secrets(getattr(prov, "secrets", ()))
    pass_ = _Pass(prov, CassetteTransport(cassettes, test_id=opts.test_id), run)
    for done, case in enumerate(cases, 1):
        pass_.case(case)
        if done % 256 == 0:  # the loop handed back now and then: no task starves
            await asyncio.sleep(0)
    if pass_.first_miss is not None:
        raise Abort(pass_.first_miss.counted(pass_.misses, len(cases)))
    return pass_.rest


def replay_failures(store: CassetteStore | None) -> failures.FailureLog | None:
    """In a replay-only run, the failures its recordings noted (read once per run)."""
    if store is None or store.policy.records:
        return None
    log = failures.log_for(store.root)
    return log if log.count() else None


def noted_failure(
    prov: Provider | CallableProvider,
    case: CaseLike,
    test_id: str | None,
    log: failures.FailureLog | None,
) -> str | None:
    """The error ``log`` holds for ``case`` failed by ``test_id``: not asked again."""
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
    key: tuple[str, str, str | bytes] | None = None
    if isinstance(provider, CallableProvider):
        key = output_request(provider.model, case.system, case.prompt)
    elif (key_of := getattr(provider, "replay_key", None)) is not None:
        key = key_of(case.system, case.prompt)
    if key is None:
        request = provider.build_request(case.system, case.prompt)  # type: ignore[union-attr]
        key = (request.method, str(request.url), request.content)
    found = failures.request_key(*key, case.repeat)
    return found if test_id is None else failures.scoped(found, test_id)


class _Pass:
    """One replay pass's state."""

    def __init__(self, provider: Provider, replayer: CassetteTransport, run: Run) -> None:
        self.provider, self.replayer, self.run = provider, replayer, run
        self.rest: list[Todo] = []
        self.live_only = functools.cache(replayer.live_only)  # per entity
        self.first_miss: CassetteMiss | None = None
        self.misses = 0
        self.log = failures.log_for(replayer.store.root)  # read when a miss asks
        self.noted = replay_failures(replayer.store)
        self.bodies: dict[str | None, tuple[str, str, str, str] | None] = {}
        # a built-in's parse_response reads a recording as stored
        self.parse = provider.parse_response if isinstance(provider, HTTPProvider) else None
        self.headers = functools.cache(_reply_headers)  # per distinct headers

    def case(self, case: CaseLike) -> None:
        provider, replayer, run = self.provider, self.replayer, self.run
        if self.live_only(case.entity_id):  # recording a new cassette: no request built twice
            self.rest.append((case, None))
            return
        # this test's recording failed it (even if another test's recording answered the
        # prompt): its replay fails it too
        noted = noted_failure(provider, case, replayer.test_id, self.noted)
        if noted is not None:
            run.finish(case, noted)
            return
        try:
            response = self.replayed(case)
        except CassetteMiss as miss:
            # a prompt that failed while recording (noted before notes were per test)
            noted = noted_failure(provider, case, None, self.log)
            if noted is not None:
                run.finish(case, noted)
            else:
                self.first_miss = self.first_miss or miss
                self.misses += 1
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
        return method, url, f"{head}{_STR(case.prompt)}{tail}"  # one string built, not two

    def replayed(self, case: CaseLike) -> httpx.Response | Reply | None:
        """The recorded reply to ``case`` (None: record it live); a built-in provider's by key,
        unbuilt: the httpx objects took half of a replayed case."""
        key = self.key(case)
        try:
            if key is not None:
                return self.replayer.find(*key, case.entity_id, case.repeat, case)
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
                found = self.headers(headers)
                if found is not None:
                    try:  # a try, not contextlib.suppress: no context manager built per case
                        return self.parse(RecordedReply(text, found))
                    except Exception:  # judged again below, URL and all
                        pass
            replayed = response_of(RecordedResponse(status, headers, text.encode("utf-8"), reason))
            replayed.request = self.run.request(provider, case)
            replayed.read()
        return judge(provider, replayed, case)


def _reply_headers(recorded: tuple[tuple[str, str], ...]) -> dict[str, str] | None:
    """A recording's headers as a response's read (None unless ASCII, as httpx keeps them)."""
    headers: dict[str, str] = {}
    for name, value in recorded:
        if not (name.isascii() and value.isascii()):
            return None
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers
