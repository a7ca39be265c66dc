"""Reading a FaiRLLM/FairEval result folder and writing its offline re-run."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_recfair.__main__ import main
from pytest_recfair.errors import ConfigError, DataError
from pytest_recfair.importer.published import read_folder
from pytest_recfair.importer.run import import_run
from pytest_recfair.prompts.cases import build_cases
from pytest_recfair.prompts.grids import load_grid
from pytest_recfair.prompts.seeds import load_seeds
from tests.support.csvfile import rewrite_csv

SYNTH = Path(__file__).parents[1] / "data" / "published_synth"


def test_read_folder_follows_the_notebook_reader() -> None:
    run = read_folder(SYNTH)
    assert run.k == 5
    assert list(run.classes) == ["age", "religion"]
    assert list(run.classes["age"]) == ["a middle aged", "a young", "an old"]
    assert len(run.neutral) == 6
    young = run.classes["age"]["a young"]
    assert set(run.neutral) - set(young) == {"Di Vance", "Flo Ardent"}  # never answered
    # "Bo Kestrel" has two rows in "a middle aged": the later one wins
    with (SYNTH / "top_5" / "age" / "a middle aged.csv").open(encoding="utf-8") as fh:
        bo = [r["Result"] for r in csv.DictReader(fh) if r["name"] == "Bo Kestrel"]
    assert len(bo) == 2
    assert bo[0] != bo[1]
    assert run.classes["age"]["a middle aged"]["Bo Kestrel"].reply == bo[1]
    assert len(run.batch) == 12  # the religion class was sent through the Batch API


def test_n_rows_cut(tmp_path: Path) -> None:
    run = read_folder(SYNTH / "top_5", n=3)
    assert list(run.neutral) == ["Ada Marlow", "Bo Kestrel", "Cy Orrin"]


def test_import_writes_a_verbatim_audit(tmp_path: Path) -> None:
    out = tmp_path / "audit"
    summary = import_run(SYNTH, out, flavour="faireval")
    assert summary.absent == 2
    assert summary.model == "gpt-4o-mini-2024-07-18"  # from the batch files
    # 6 neutral + 16 age + 12 religion replies, the neutral ones once per class
    assert summary.interactions == (6 + 16) + (6 + 12)
    tpl = yaml.safe_load((out / "templates.yaml").read_text(encoding="utf-8"))
    assert tpl["languages"]["en"]["verbatim"] is True
    assert "neutral_system" not in tpl["languages"]["en"]
    grid = load_grid(out / "grid.yaml")
    assert grid.attribute("religion").labels == ("a Buddhist", "an Islamic")
    seeds = load_seeds(out / "seeds.csv")
    cases = build_cases(grid, out / "templates.yaml", seeds, k=5, attributes=["religion"])
    published = read_folder(SYNTH).classes["religion"]["an Islamic"]["Ed Quill"].prompt
    assert published in {c.prompt for c in cases}  # character for character
    absent = json.loads((out / "absent.json").read_text(encoding="utf-8"))
    assert {(a["value"], a["entity_id"]) for a in absent} == {
        ("a young", "age.di-vance"),
        ("a young", "age.flo-ardent"),
    }
    # one cassette per (class, seed entity): two classes asking the same prompt keep
    # their own published replies (issue 21, bug A)
    cassettes = sorted(p.name for p in (out / "cassettes").iterdir())
    assert cassettes == sorted(f"{cls}.{s.id}.json" for cls in ("age", "religion") for s in seeds)


def test_neutral_with_its_own_system_message(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(SYNTH, src)
    path = src / "top_5" / "neutral" / "neutral.csv"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("You are a movie", "You are a film"), encoding="utf-8")
    import_run(src, tmp_path / "out")
    tpl = yaml.safe_load((tmp_path / "out" / "templates.yaml").read_text(encoding="utf-8"))
    assert tpl["languages"]["en"]["neutral_system"] == "You are a film recommendation system."


def test_cli_reports_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "faireval", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: import:")
    assert "top_K folder" in err
    assert "\n" not in err


def test_cli_success_prints_the_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import", "fairllm", str(SYNTH), "--out", str(tmp_path / "o")]) == 0
    assert "pytest --fairness" in capsys.readouterr().out


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not empty"):
        import_run(SYNTH, SYNTH)
    bad = tmp_path / "top_5" / "age"
    bad.mkdir(parents=True)
    (tmp_path / "top_5" / "neutral.csv").write_text("who,what\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"needs column\(s\) 'name', 'Result'"):
        read_folder(tmp_path)


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SYNTH, src)
    return src


def _cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: import:"), err
    assert "\n" not in err
    return err


def test_unbalanced_quote_is_reported_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _copy(tmp_path)
    path = src / "top_5" / "age" / "an old.csv"
    text = path.read_text(encoding="utf-8")
    at = text.index('"Here are', text.index("Bo Kestrel"))  # the second row's reply
    path.write_text(text[:at] + '"Here "are' + text[at + 9 :], encoding="utf-8")
    err = _cli_error(["import", "faireval", str(src), "--out", str(tmp_path / "o")], capsys)
    assert "an old.csv" in err
    width = len(next(csv.reader(path.open(encoding="utf-8"))))
    with path.open(encoding="utf-8", newline="") as fh:  # where Python's csv finds it
        reader, line = csv.reader(fh), 1
        for bad in reader:
            if len(bad) != width:
                break
            line = reader.line_num + 1
    assert f"line {line} has {len(bad)} fields where the header has {width}" in err
    assert "unbalanced quote" in err


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe not utf-8 \x81\n", b'"a string"\n', b'{"custom_id": "x", "response": "ok"}\n'],
)
def test_bad_batch_output_is_one_line(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _copy(tmp_path)
    (src / "top_5" / "religion" / "batch_output.jsonl").write_bytes(content)
    err = _cli_error(["import", "faireval", str(src), "--out", str(tmp_path / "o")], capsys)
    assert "batch_output.jsonl" in err


def test_out_pointing_at_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x", encoding="utf-8")
    err = _cli_error(["import", "faireval", str(SYNTH), "--out", str(target)], capsys)
    assert "is a file" in err


def test_bom_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    for path in (src / "top_5").rglob("*.csv"):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_folder(src).neutral.keys() == read_folder(SYNTH).neutral.keys()


def test_a_class_without_one_template_is_skipped_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _copy(tmp_path)
    path = src / "top_5" / "religion" / "a Buddhist.csv"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("I am a Buddhist fan", "I am a fan"), encoding="utf-8")
    assert main(["import", "faireval", str(src), "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "skipped class religion:" in printed
    test_file = (tmp_path / "o" / "test_published.py").read_text(encoding="utf-8")
    assert "test_age" in test_file
    assert "test_religion" not in test_file


def test_model_is_labelled_honestly_without_batch_files(tmp_path: Path) -> None:
    src = tmp_path / "Gemini" / "movie"
    shutil.copytree(SYNTH, src)
    for path in (src / "top_5").rglob("batch_*.jsonl"):
        path.unlink()
    summary = import_run(src, tmp_path / "o")
    assert summary.model == "gemini-published"
    assert any("--model" in note for note in summary.notes)
    ini = (tmp_path / "o" / "pytest.ini").read_text(encoding="utf-8")
    assert "recfair_model = gemini-published" in ini
    assert "recfair_missing = zero" in ini


def test_replies_in_instruction_without_batch_files_use_the_bundled_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _copy(tmp_path)
    for path in (src / "top_5").rglob("batch_*.jsonl"):
        path.unlink()
    for path in (src / "top_5").rglob("*.csv"):
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for row in rows:
            row["Instruction"] = row["Result"]  # the processing script's overwrite
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    assert main(["import", "faireval", str(src), "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "the bundled template set is used" in printed
    assert "templates='faireval'" in (tmp_path / "o" / "test_published.py").read_text("utf-8")


def test_a_reply_quoting_json_with_commas_reads_as_pythons_csv_reads_it(tmp_path: Path) -> None:
    """issue 33 point 7: a cell holding multi-line JSON with doubled quotes, one line of
    which has as many commas as the header, is one cell (as Python's csv reads it)."""
    src = _copy(tmp_path)
    path = src / "top_5" / "age" / "an old.csv"
    width = len(next(csv.reader(path.open(encoding="utf-8"))))
    line = "{" + ", ".join(f'"f{i}": {i}' for i in range(width)) + "}"
    rewrite_csv(
        path, lambda rows: [rows[0], *[[*r[:3], f"{r[3]}\n{line}", *r[4:]] for r in rows[1:]]]
    )
    with path.open(encoding="utf-8", newline="") as fh:
        expected = {r[0]: r[3] for r in list(csv.reader(fh))[1:]}
    got = read_folder(src).classes["age"]["an old"]
    assert {name: row.reply for name, row in got.items()} == expected


def test_a_value_file_holding_only_its_header_is_left_out_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 33 point 6: such a value vanished from the report without a word."""
    src = _copy(tmp_path)
    rewrite_csv(src / "top_5" / "age" / "an old.csv", lambda rows: rows[:1])
    assert main(["import", "faireval", str(src), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "value files holding only their header left out (no reply): age/an old.csv" in out
    grid = yaml.safe_load((tmp_path / "o" / "grid.yaml").read_text(encoding="utf-8"))
    age = next(a for a in grid["attributes"] if a["name"] == "age")
    assert [v["label"] for v in age["values"]] == ["a middle aged", "a young"]


def test_a_space_after_a_closing_quote_reads_as_pythons_csv_reads_it(tmp_path: Path) -> None:
    """issue 33 point 7: a quoted cell followed by a space (``"...(1988)" ,an old``) is
    what Python's csv (and the authors' pandas) read without a word; the importer
    refused the whole file in strict mode."""
    src = _copy(tmp_path)
    path = src / "top_5" / "age" / "an old.csv"
    text = path.read_text(encoding="utf-8")
    at = text.index('",an old,', text.index("Ada Marlow"))  # the first row's reply ends
    path.write_text(text[:at] + '" ' + text[at + 1 :], encoding="utf-8")
    with pytest.raises(csv.Error):  # what strict parsing made of it
        list(csv.reader(path.open(encoding="utf-8", newline=""), strict=True))
    with path.open(encoding="utf-8", newline="") as fh:
        expected = {r[0]: r[3] for r in list(csv.reader(fh))[1:]}
    got = read_folder(src).classes["age"]["an old"]
    assert {name: row.reply for name, row in got.items()} == expected
    assert got["Ada Marlow"].reply.endswith("(1988) ")


def test_a_folder_without_prompts_says_the_bundled_set_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 33: without an 'Instruction' column (the third) the bundled templates were
    asked without a word (or said to be there because 'Instruction' held replies)."""
    src = _copy(tmp_path)
    for path in (src / "top_5").rglob("*.csv"):
        rewrite_csv(path, lambda rows: [[c for i, c in enumerate(r) if i != 2] for r in rows])
    assert main(["import", "faireval", str(src), "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "neutral.csv has no 'Instruction' column" in printed
    assert "holds replies" not in printed
    assert "templates='faireval'" in (tmp_path / "o" / "test_published.py").read_text("utf-8")


def test_an_empty_prompt_in_the_neutral_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One neutral row without its prompt: a line naming the file and the entity (it was
    an error naming neither)."""
    src = _copy(tmp_path)
    path = src / "top_5" / "neutral" / "neutral.csv"
    rewrite_csv(path, lambda rows: [rows[0], rows[1], [*rows[2][:2], "", *rows[2][3:]], *rows[3:]])
    name = _table_names(path)[1]
    err = _cli_error(["import", "faireval", str(src), "--out", str(tmp_path / "o")], capsys)
    assert f"neutral.csv, entity {name!r}: its prompt differs" in err
    assert not (tmp_path / "o").exists()


def _table_names(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as fh:
        return [r["name"] for r in csv.DictReader(fh)]


def test_a_neutral_file_holding_only_its_header_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a traceback (StopIteration)."""
    src = _copy(tmp_path)
    rewrite_csv(src / "top_5" / "neutral" / "neutral.csv", lambda rows: rows[:1])
    err = _cli_error(["import", "faireval", str(src), "--out", str(tmp_path / "o")], capsys)
    assert "neutral.csv' holds only its header" in err
