"""``python -m pytest_recfair import faireval|fairllm DIR --out OUT``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_recfair.errors import RecfairError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_recfair")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser(
        "import", help="turn a published FaiRLLM/FairEval result folder into an offline audit"
    )
    imp.add_argument("flavour", choices=("faireval", "fairllm"), help="the study's template set")
    imp.add_argument("source", help="the result folder (top_K, or the folder holding it)")
    imp.add_argument("--out", required=True, help="new folder to write the audit into")
    imp.add_argument("--rows", type=int, default=500, help="rows read per file (notebook: 500)")
    imp.add_argument("--language", default="en", help="language code of the prompts")
    imp.add_argument("--model", default=None, help="model id (default: from batch files)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from pytest_recfair.importer import import_run

    try:
        s = import_run(
            args.source,
            args.out,
            flavour=args.flavour,
            n=args.rows,
            language=args.language,
            model=args.model,
        )
    except RecfairError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    classes = ", ".join(f"{c} ({v})" for c, v in s.classes.items())
    print(
        f"imported top_{s.k}: {s.entities} entities; classes {classes}; {s.interactions} "
        f"replies recorded, {s.absent} never answered (left out of their value's mean), "
        f"{s.dropped} rows naming entities without a neutral reply ignored; model {s.model}\n"
        f"re-run offline: cd {s.out} && pytest --fairness --fairness-update"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
