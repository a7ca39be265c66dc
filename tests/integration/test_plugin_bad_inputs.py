"""Every bad input gets one line (issue 10 point 8): the file or argument, what was
expected, what to do next; never a traceback, a hang or a silent acceptance.

Each case is a real pytest run of a small project: the exit status, the one-line message
and the absence of any traceback are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.support.plugin import CONFTEST, plugin_args

pytest_plugins = ["pytester"]

USAGE, FAILED = 4, 1  # pytest's exit codes: usage error, tests failed or errored


@dataclass(frozen=True)
class Bad:
    says: str  # part of the one-line message
    status: int
    marker: str = ""
    ini: str = ""
    args: tuple[str, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)


CASES = {
    "ini k not a number": Bad("recfair_k='abc' (ini): expected an integer >= 1", USAGE,
                              ini="recfair_k = abc"),
    "ini update overridden by the flag": Bad("recfair_update='maybe' (ini): expected true",
                                             USAGE, ini="recfair_update = maybe",
                                             args=("--fairness-update",)),
    "ini max_failed above 1": Bad("recfair_max_failed='2' (ini): expected a share", USAGE,
                                  ini="recfair_max_failed = 2"),
    "marker max_failed not a share": Bad("max_failed=1.5 (marker): expected a share", USAGE,
                                         marker=", max_failed=1.5"),
    "negative entities option": Bad("--fairness-entities=-3 (command-line): expected an "
                                    "integer", USAGE, args=("--fairness-entities=-3",)),
    "extra headers without a colon": Bad("recfair_extra_headers='nocolon' (ini): expected "
                                         "'Header-Name", USAGE,
                                         ini="recfair_extra_headers = nocolon"),
    "grid file not UTF-8": Bad("bad.yaml' is not UTF-8 text", USAGE, marker=", grid='bad.yaml'",
                               files={"bad.yaml": b"name: x\n\xff\xfe bad\n"}),
    "grid file not YAML": Bad("broken.yaml' is not valid YAML", USAGE,
                              marker=", grid='broken.yaml'",
                              files={"broken.yaml": b"not: [valid\n"}),
    "seeds file not JSON": Bad("seeds.json' is not valid JSON", USAGE,
                               marker=", seeds='seeds.json'", files={"seeds.json": b'{"x": '}),
    "template language missing": Bad("has no 'xx' templates", FAILED, marker=", language='xx'"),
    "report path cannot be created": Bad("cannot create files in", USAGE,
                                         args=("--fairness-report=/proc/recfair/r.json",)),
    "report path unknown format": Bad("must end in one of .json, .md, .html", USAGE,
                                      args=("--fairness-report=r.pdf",)),
    "baseline dir cannot be created": Bad("cannot write the baseline", FAILED,
                                          ini="recfair_baseline_dir = /proc/recfair",
                                          args=("--fairness-update",)),
    "merge source missing": Bad("--fairness-merge: ", FAILED,
                                args=("--fairness-merge=nothere",)),
    "seeds file empty": Bad("empty.txt' contains no entities", USAGE,
                            marker=", seeds='empty.txt'", files={"empty.txt": b""}),
    "seeds file not UTF-8": Bad("bin.txt' is not UTF-8 text", USAGE,
                                marker=", seeds='bin.txt'", files={"bin.txt": b"\xff\xfe\x00"}),
    "catalogue not YAML": Bad("catalogue file", USAGE,
                              marker=", catalogue='broken.yaml', item_field='genre'",
                              files={"broken.yaml": b"a: [1\n"}),
    "candidates not YAML": Bad("candidates file", USAGE, marker=", candidates='broken.yaml'",
                               files={"broken.yaml": b"a: [1\n"}),
    "absent file not JSON": Bad("absent file", FAILED, marker=", absent='broken.yaml'",
                                files={"broken.yaml": b"a: [1\n"}),
    "templates not YAML": Bad("templates file 'broken.yaml' is not valid YAML", FAILED,
                              marker=", templates='broken.yaml'",
                              files={"broken.yaml": b"a: [1\n"}),
    "ini gate unknown": Bad("recfair_gate='foo' (ini): expected one of", USAGE,
                            ini="recfair_gate = foo"),
    "ini alpha too large": Bad("recfair_alpha=0.9 (ini): expected a number", USAGE,
                               ini="recfair_alpha = 0.9"),
    "ini retries not a number": Bad("recfair_max_retries='many' (ini)", USAGE,
                                    ini="recfair_max_retries = many"),
    "shard not I/N": Bad("--fairness-shard: expected I/N", USAGE, args=("--fairness-shard=x",)),
    "marker repeats zero": Bad("repeats=0 (marker): expected an integer >= 1", USAGE,
                               marker=", repeats=0"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_a_bad_input_is_one_line(pytester: pytest.Pytester, case: Bad) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(f"[pytest]\nrecfair_entities = 3\nrecfair_n_resamples = 50\n{case.ini}\n")
    pytester.makepyfile(
        test_audit=f"""
        from pytest_recfair import fairness

        @fairness(attr="religion"{case.marker})
        def test_religion(fairness_result):
            pass
        """
    )
    for name, data in case.files.items():
        (pytester.path / name).write_bytes(data)
    run = pytester.runpytest(*plugin_args(), "--fairness", "-p", "no:cacheprovider", *case.args)
    out = (run.stdout.str() + "\n" + run.stderr.str()).splitlines()
    assert run.ret == case.status, out
    said = [line for line in out if case.says in line]
    assert len(said) == 1 or (case.status == FAILED and said), out  # the summary repeats it
    assert not [line for line in out if line.startswith(("Traceback", "E   ", "    raise"))]
    assert not [line for line in out if "During handling of the above exception" in line]
