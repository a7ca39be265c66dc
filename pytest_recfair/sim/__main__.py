"""``python -m pytest_recfair.sim --port N``: serve the simulated recommender over HTTP."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from pytest_recfair.errors import RecfairError
from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.profile import Faults
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import DEFAULT_MODEL, SimServer

# (flag, type, default, metavar, help) of the options that take a value
_OPTIONS: tuple[tuple[str, type, object, str | None, str], ...] = (
    ("--host", str, "127.0.0.1", None, "address to bind (default: loopback)"),
    ("--bias", str, None, "FILE", "bias profile: a YAML file or a bundled name ('demo')"),
    ("--noise", float, 0.0, None, "fraction re-sampled per call"),
    ("--heterogeneity", str, None, "SPEC", "per-entity spread: 'uniform' (default), "
     "'realistic', or 'stability=0.8,sensitivity=0.5'"),
    ("--seed", int, 0, None, "seed for every random draw"),
    ("--latency", float, 0.0, "MS", "delay per answer"),
    ("--jitter", float, 0.0, "MS", "+- latency jitter"),
    ("--k", int, 10, None, "list length when a prompt names none"),
    ("--model", str, DEFAULT_MODEL, None, "model id to report"),
    ("--api-key", str, None, None, "require 'Authorization: Bearer KEY'"),
    ("--batch-delay", float, 0.0, "S", "seconds a batch takes"),
    ("--batch-errors", float, 0.0, "P", "share of failed batch lines"),
    ("--rpm", float, None, "N", "requests per minute allowed (429 past them)"),
    ("--tpm", float, None, "N", "tokens per minute allowed (429 past them)"),
    ("--burst", float, 1.0, "S", "seconds of the limits a burst may use"),
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_recfair.sim",
        description="Serve a simulated LLM recommender (with planted biases) as an "
        "OpenAI-compatible /v1/chat/completions endpoint (plus /v1/messages and the "
        "OpenAI and Anthropic batch endpoints).",
    )
    parser.add_argument("--port", type=int, required=True, help="port to listen on (0 = any free)")
    for flag, kind, default, metavar, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    spec = "'429=0.1,500=0.05,timeout=0.05,malformed=0.02,retry_after=1,refusals.Muslim=0.2' "
    spec += "or a YAML file; may be repeated"
    parser.add_argument("--faults", action="append", default=[], metavar="SPEC", help=spec)
    parser.add_argument("--chatty", action="store_true", help="add a one-line preface to replies")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        recommender = SimulatedRecommender(
            args.bias,
            noise=args.noise,
            seed=args.seed,
            faults=Faults.parse(args.faults or None),
            default_k=args.k,
            style="chatty" if args.chatty else "plain",
            heterogeneity=args.heterogeneity,
        )
        batch = BatchOptions(delay_s=args.batch_delay, error_rate=args.batch_errors, seed=args.seed)
        server = SimServer(
            recommender, host=args.host, port=args.port, latency_ms=args.latency,
            jitter_ms=args.jitter, model=args.model, api_key=args.api_key, batch=batch,
            rpm=args.rpm, tpm=args.tpm, burst_s=args.burst,
        )  # fmt: skip
        with contextlib.suppress(KeyboardInterrupt):  # serve in the foreground until ^C
            asyncio.run(server._serve(lambda line: print(line, flush=True)))
        if server._startup_error is not None:
            raise server._startup_error
    except (RecfairError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
