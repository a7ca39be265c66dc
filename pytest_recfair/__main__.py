"""The command line: ``python -m pytest_recfair COMMAND``. Bad input is one line on stderr
and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pytest_recfair import secrets
from pytest_recfair.errors import DataError, RecfairError
from pytest_recfair.fileio import atomic_write_text
from pytest_recfair.vocab import PLUGIN_VERSION, REPORT_FORMATS


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (its default prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def _number(ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    def number(text: str) -> float:
        if not ok(x := float(text)):
            raise argparse.ArgumentTypeError(f"must be {expected}; got {text}")
        return x

    return number


def _parser() -> argparse.ArgumentParser:
    from pytest_recfair.compare.runs import COMPARE_FORMATS

    parser = _Parser(prog="python -m pytest_recfair")
    parser.add_argument("--version", action="version", version=f"pytest-recfair {PLUGIN_VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="render a stored JSON run report as Markdown or HTML")
    rep.set_defaults(run_command=_report)
    rep.add_argument(
        "run",
        help="a JSON report (--fairness-report=run.json, or a history entry; with --history "
        "also an entry's number, latest, -N or commit prefix)",
    )
    rep.add_argument(
        "--to", required=True, choices=[f.lstrip(".") for f in REPORT_FORMATS], help="format"
    )
    rep.add_argument("--history", help="a --fairness-history DIR: the HTML plots SNSR over it")
    cmp = sub.add_parser(
        "compare",
        help="the drift table between two stored runs (B against A), or a stored comparison "
        "(one --format json file) rendered again",
    )
    cmp.set_defaults(run_command=_compare)
    cmp.add_argument(
        "a",
        help="the reference: a JSON run report, or with --history an entry (its number, "
        "latest, -N, a commit prefix); alone, a comparison written by --format json",
    )
    cmp.add_argument("b", nargs="?", default=None, help="the later run (the same kinds of name)")
    cmp.add_argument("--history", help="the --fairness-history DIR the entry names refer to")
    cmp.add_argument(
        "--format", default="text", choices=COMPARE_FORMATS, help="output format (%(default)s)"
    )
    for each in (rep, cmp):
        each.add_argument("-o", "--output", help="file to write (default: stdout)")
    level = _number(lambda x: 0.0 < x < 1.0, "strictly between 0 and 1, e.g. 0.05")
    cmp.add_argument("--alpha", type=level, default=0.05, help="overall level (0.05)")
    margin = _number(lambda x: 0.0 <= x < float("inf"), "a finite number >= 0")
    cmp.add_argument(
        "--tolerance", type=margin, default=0.0, help="worsening allowed before WORSE (%(default)s)"
    )
    cmp.add_argument("--seed", type=int, default=0, help="seed of the sign flips (0)")
    ex = sub.add_parser(
        "examples",
        help="write the input files the docs' examples use (docs/itemside.md) and "
        "pipeline_example/, a recorded pipeline audit (docs/pipeline.md)",
    )
    ex.set_defaults(run_command=_examples)
    ex.add_argument("--dir", default=".", help="the project's rootdir (default: here)")
    imp = sub.add_parser(
        "import", help="turn a published FaiRLLM/FairEval result folder into an offline audit"
    )
    imp.set_defaults(run_command=_import)
    imp.add_argument(
        "flavour", choices=("faireval", "fairllm", "biaslens"), help="the study (template set)"
    )
    imp.add_argument("source", help="the result folder (top_K, or the folder holding it)")
    imp.add_argument("--out", required=True, help="new folder to write the audit into")
    imp.add_argument(
        "--rows", dest="n", metavar="ROWS", type=int, help="rows per file (default: all)"
    )
    imp.add_argument("--language", default="en", help="language code of the prompts")
    imp.add_argument("--model", default=None, help="model id (default: from batch files)")
    imp.add_argument(
        "--missing", default="zero", choices=("zero", "skip"), help="unparsable replies (ini key)"
    )
    imp.add_argument(
        "--replies", default="csv", choices=("csv", "batch"), help="reply of record (default csv)"
    )
    imp.add_argument(
        "--without-role", action="store_true", help="biaslens: the answers without the role"
    )
    cas = sub.add_parser("cassettes", help="convert a cassette folder: compact or expand")
    cas.set_defaults(run_command=_cassettes)
    cas.add_argument(
        "action", choices=("compact", "expand"), help="compact: to .json.gz; expand: to .json"
    )
    cas.add_argument("folder", help="the cassette folder (recfair_cassette_dir)")
    return parser


def _cassettes(args: argparse.Namespace) -> int:
    from pytest_recfair.cassettes.compact import convert

    to_compact = args.action == "compact"
    done = convert(Path(args.folder), compact=to_compact)
    print("\n".join(done.lines(to_compact)))
    return 1 if done.damaged else 0  # the good files are converted; the damaged are said


def _emit(text: str, output: str | None) -> None:
    """``text`` to stdout, or atomically to ``output`` (never a half-written file)."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(Path(output), text)
    except OSError as exc:
        raise DataError(
            f"cannot write {output} ({exc.strerror or exc}); give -o a file in a directory "
            f"this process can write."
        ) from None


def _report(args: argparse.Namespace) -> int:
    import pytest_recfair.engine.registry  # noqa: F401 - hands the kinds' sections to the report
    from pytest_recfair.report.registry import render

    fmt = next(f for f in REPORT_FORMATS if f == "." + args.to)
    suffix = Path(args.output).suffix.lower() if args.output else fmt
    if suffix and suffix != fmt and (suffix, fmt) != (".htm", ".html"):
        raise DataError(
            f"-o {args.output}: --to {args.to} writes {fmt} files; name the output "
            f"*{fmt} or pick the --to that matches {suffix}."
        )
    run = _run_of(args.run, args.history)  # with --history: an entry's name too
    history = []
    named = args.history is not None and not Path(args.run).is_file()
    if args.history is not None and fmt != ".html" and not named:
        raise DataError(f"--history is plotted by --to html only; got --to {args.to}.")
    if args.history is not None and fmt == ".html":
        from pytest_recfair.report.history import load_history

        history = load_history(Path(args.history))
    _emit(render(fmt, run.results, run.baselines, models=run.models, history=history), args.output)
    return 0


def _run_of(name: str, history: str | None) -> Any:
    """A stored run named on the command line: a file, else an entry of ``--history``."""
    from pytest_recfair.report.history import find_entry, load_run

    if history is None or Path(name).is_file():
        return load_run(name)
    return load_run(find_entry(Path(history), name))


def _compare(args: argparse.Namespace) -> int:
    import pytest_recfair.engine.registry  # noqa: F401 - hands the kinds' sections to the report
    from pytest_recfair.compare.runs import (
        Compared,
        compare_runs,
        parse_comparison,
        render_comparison,
    )

    if args.b is None:  # a stored comparison, rendered again
        path = Path(args.a)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(
                f"cannot read {path} ({getattr(exc, 'strerror', None) or exc}); give two runs "
                f"to compare, or one comparison written by --format json."
            ) from None
        done = parse_comparison(text, path)
        _emit(render_comparison(done, args.format), args.output)
        return 1 if done.drift.worse else 0
    a, b = _run_of(args.a, args.history), _run_of(args.b, args.history)
    c = compare_runs(
        a.results, b.results, alpha=args.alpha, tolerance=args.tolerance, seed=args.seed
    )
    if not c.rows:
        raise DataError(
            f"{args.a} and {args.b}: nothing could be compared ("
            + ("; ".join(c.notes) or "no audited test in either")
            + "); compare two runs of the same tests and settings."
        )
    sides = (_side(args.a, a), _side(args.b, b))
    _emit(render_comparison(Compared(c, *sides), args.format), args.output)
    return 1 if c.worse else 0


def _side(name: str, run: Any) -> str:
    """What a side was: its file, and for a history entry its commit and date."""
    entry = run.entry
    where = [str(entry["commit"])[:7]] if entry.get("commit") else []
    where += [str(entry["date"]).replace("T", " ")[:16]] if entry.get("date") else []
    label = name if str(run.path) == name else f"{name} ({run.path})"
    return f"{label} [{', '.join(where)}]" if where else label


def _import(args: argparse.Namespace) -> int:
    if args.flavour == "biaslens":
        from pytest_recfair.importer.biaslens import import_biaslens

        done: Any = import_biaslens(
            args.source, args.out, model=args.model, without_role=args.without_role
        )
    else:
        from pytest_recfair.importer.run import import_run

        keys = ("flavour", "n", "language", "model", "missing", "replies")
        done = import_run(args.source, args.out, **{k: getattr(args, k) for k in keys})
    print("\n".join(done.lines()))
    return 0


def _examples(args: argparse.Namespace) -> int:
    from pytest_recfair.prompts.seeds import write_examples

    for path, what in write_examples(Path(args.dir)):
        print(f"{what}: {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        command: Callable[[argparse.Namespace], int] = args.run_command
        return command(args)
    except RecfairError as exc:
        print(f"error: {secrets.scrub(str(exc))}", file=sys.stderr)  # it may quote an input
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
