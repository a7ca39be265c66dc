"""``python -m pytest_recfair.sim --port N``: serve the simulated recommender over HTTP."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_recfair.errors import RecfairError
from pytest_recfair.sim.batch import BatchOptions
from pytest_recfair.sim.profile import Faults
from pytest_recfair.sim.recommender import SimulatedRecommender
from pytest_recfair.sim.server import DEFAULT_MODEL, SimServer, run_forever


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_recfair.sim",
        description="Serve a simulated LLM recommender (with planted biases) as an "
        "OpenAI-compatible /v1/chat/completions endpoint (plus /v1/messages and the "
        "OpenAI and Anthropic batch endpoints).",
    )
    parser.add_argument("--port", type=int, required=True, help="port to listen on (0 = any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument(
        "--bias", metavar="FILE", help="bias profile: a YAML file or a bundled name ('demo')"
    )
    parser.add_argument("--noise", type=float, default=0.0, help="fraction re-sampled per call")
    parser.add_argument(
        "--heterogeneity",
        metavar="SPEC",
        help="per-entity spread: 'uniform' (default), 'realistic', or "
        "'stability=0.8,sensitivity=0.5'",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for every random draw")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="delay per answer")
    parser.add_argument("--jitter", type=float, default=0.0, metavar="MS", help="+- latency jitter")
    parser.add_argument(
        "--faults",
        action="append",
        default=[],
        metavar="SPEC",
        help="'429=0.1,500=0.05,timeout=0.05,malformed=0.02,retry_after=1,refusals.Muslim=0.2' "
        "or a YAML file; may be repeated",
    )
    parser.add_argument("--k", type=int, default=10, help="list length when a prompt names none")
    parser.add_argument("--chatty", action="store_true", help="add a one-line preface to replies")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id to report")
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--batch-delay", type=float, default=0.0, metavar="S", help="seconds a batch takes"
    )
    parser.add_argument(
        "--batch-errors", type=float, default=0.0, metavar="P", help="share of failed batch lines"
    )
    parser.add_argument(
        "--rpm", type=float, metavar="N", help="requests per minute allowed (429 past them)"
    )
    parser.add_argument(
        "--tpm", type=float, metavar="N", help="tokens per minute allowed (429 past them)"
    )
    parser.add_argument(
        "--burst",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds of the limits a burst may use",
    )
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
        server = SimServer(
            recommender,
            host=args.host,
            port=args.port,
            latency_ms=args.latency,
            jitter_ms=args.jitter,
            model=args.model,
            api_key=args.api_key,
            batch=BatchOptions(
                delay_s=args.batch_delay, error_rate=args.batch_errors, seed=args.seed
            ),
            rpm=args.rpm,
            tpm=args.tpm,
            burst_s=args.burst,
        )
        run_forever(server, announce=lambda line: print(line, flush=True))
    except (RecfairError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
