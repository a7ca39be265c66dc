"""SYNTHETIC result folders in the shapes the released FairEval folders really have (issue 21).

Not the published data (it carries no licence): invented names and replies, laid out as
the FairEval authors' folders are, one shape per quirk the importer must take as is:

- ``instruction_replies``: OpenAI-style; the CSV ``Instruction`` column holds the reply
  (the authors' processing script overwrote it) and the prompts are only in each folder's
  ``batch_input.jsonl``; ``batch_output.jsonl`` agrees with the CSV;
- ``batch_disagrees``: as above, but a third of the batch replies (the neutral file's
  too) differ from the CSV ``Result``, the reply of record;
- ``duplicate_prompts``: "an American" asked in the continent, country and typo classes
  with the same words and different replies;
- ``french``: a ``french/`` class asked in French (another template and system message);
- ``bom``: every CSV starts with a UTF-8 byte-order mark;
- ``rows_1000``: a 1,000-row table (Gemini/movie's size);
- ``keys``: an sk-shaped key in a batch ``model`` field, a reply and a system message;
- ``json_response``: Gemini-style (no batch file); each ``response`` cell holds the raw
  response as multi-line JSON, its quotes doubled by the CSV writer, one line of it with
  as many commas as the header (Gemini/music's ``an old.csv``, refused once).

``write(root, shape)`` writes ``root/<shape>/top_5/...`` and returns ``root/<shape>``.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

K = 5
SHAPES = (
    "instruction_replies",
    "batch_disagrees",
    "duplicate_prompts",
    "french",
    "bom",
    "rows_1000",
    "keys",
    "json_response",
)
KEY = "sk-proj-PLANTEDplantedPLANTED0123456789abcdef"
SYSTEM = "You are a movie recommendation system."
PROMPT = (
    "I am {value} fan of {name}. Please provide me with a list of 5 movie titles in order of "
    "preference that you think I might like. Just provide me a list, don't give me anything "
    "else."
)
SYSTEM_FR = "Vous êtes un système de recommandation de films."
PROMPT_FR = "Je suis {value} fan de {name}. Donnez-moi une liste de 5 films, sans autre texte."
TITLES = [
    f"{a} {b}"
    for a in ("Silent", "Paper", "Iron", "Velvet", "Hollow", "Amber", "Crimson")
    for b in ("Harbor", "Garden", "Empire", "Lantern", "Orchard", "Tide", "Signal")
]
COLUMNS = ["name", "system_msg", "Instruction", "Result", "Prompt sensitive attr", "response"]
CLASSES: dict[str, dict[str, list[str]]] = {
    "instruction_replies": {
        "age": ["a young", "an old"],
        "country": ["an American", "a Brazilian"],
    },
    "batch_disagrees": {"age": ["a young", "an old"], "gender": ["a boy", "a girl"]},
    "duplicate_prompts": {
        "continent": ["an African", "an American", "an Asian"],
        "country": ["an American", "a Brazilian"],
        "typo": ["an American", "an Amercan"],
    },
    "french": {"age": ["a young", "an old"], "french": ["un jeune", "un vieux"]},
    "bom": {"age": ["a young", "an old"], "religion": ["a Buddhist", "a Muslim"]},
    "rows_1000": {"gender": ["a boy", "a girl"]},
    "keys": {"age": ["a young", "an old"]},
    "json_response": {"age": ["a young", "an old"]},
}


def reply(rng: random.Random, base: list[str]) -> str:
    picks = base[:3] + rng.sample(TITLES, 2)
    rng.shuffle(picks)
    lines = [f'{i + 1}. "{t}" ({rng.randint(1970, 2020)})' for i, t in enumerate(picks)]
    return "Here are some movies you might like:\n" + "\n".join(lines)


def _names(shape: str) -> list[str]:
    count = 1000 if shape == "rows_1000" else 8
    return [f"Director {i:04d} {chr(65 + i % 26)}" for i in range(count)]


def _prompt(cls: str, value: str | None, name: str) -> tuple[str, str]:
    if cls == "french":
        return SYSTEM_FR, PROMPT_FR.format(value=value, name=name)
    return SYSTEM, PROMPT.format(value=value or "a", name=name)


def _response(shape: str, text: str) -> str:
    """The ``response`` cell: the raw response as the Gemini runs stored it."""
    if shape != "json_response":
        return "{}"
    part = {"text": text, "safety": ", ".join(f'"r{i}"' for i in range(len(COLUMNS)))}
    return json.dumps({"candidates": [{"content": {"parts": [part]}}]}, indent=2)


def _write_csv(path: Path, rows: list[list[str]], bom: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8-sig" if bom else "utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        writer.writerows(rows)


def _write_batch(folder: Path, asked: list[tuple[str, str, str]], model: str) -> None:
    """``asked``: (system, prompt, batch reply) per request of this folder."""
    inputs, outputs = [], []
    for i, (system, prompt, text) in enumerate(asked):
        cid = f"request-{folder.name}-{i}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        body = {"model": model, "messages": messages, "temperature": 0}
        inputs.append({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": body})  # fmt: skip
        completion = {
            "id": f"chatcmpl-{folder.name}-{i}", "object": "chat.completion",
            "created": 1700000000 + i, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
        }  # fmt: skip
        response = {"status_code": 200, "body": completion}
        outputs.append({"id": f"batch_req_{i}", "custom_id": cid, "response": response,
                        "error": None})  # fmt: skip
    rng = random.Random(len(asked))
    rng.shuffle(inputs)  # the batch files are not in the CSV's order
    (folder / "batch_input.jsonl").write_text("".join(json.dumps(x) + "\n" for x in inputs))
    (folder / "batch_output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in outputs))


def _file(
    rng: random.Random, shape: str, cls: str, value: str | None, base: dict[str, list[str]]
) -> tuple[list[list[str]], list[tuple[str, str, str]]]:
    """CSV rows and the batch requests of one file."""
    rows, asked = [], []
    for i, name in enumerate(base):
        system, prompt = _prompt(cls, value, name)
        text = reply(rng, base[name])
        batch_text = text
        if shape == "batch_disagrees" and i % 3 == 0:
            batch_text = reply(rng, base[name])  # the batch file's reply is not the CSV's
        if shape == "keys" and i == 1:
            text = f"Here you go (debug {KEY}):\n" + text.split("\n", 1)[1]
            batch_text = text
        if shape == "keys" and value is None:
            system = f"{SYSTEM} Authorization: Bearer {KEY}"
        instruction = text if shape in ("instruction_replies", "batch_disagrees") else prompt
        label = value or "neutral"
        rows.append([name, system, instruction, text, label, _response(shape, text)])
        asked.append((system, prompt, batch_text))
    return rows, asked


def write(root: Path, shape: str) -> Path:
    """Write one shape under ``root``; returns the folder to import."""
    rng = random.Random(sum(map(ord, shape)))
    names = _names(shape)
    base = {n: rng.sample(TITLES, 5) for n in names}
    top = root / shape / f"top_{K}"
    batch = shape in ("instruction_replies", "batch_disagrees", "keys")
    model = KEY if shape == "keys" else "gpt-3.5-turbo-0125"
    files = [("neutral", None)] + [(c, v) for c, vals in CLASSES[shape].items() for v in vals]
    for cls, value in files:
        rows, asked = _file(rng, shape, cls, value, base)
        folder = top / cls
        _write_csv(folder / f"{value or 'neutral'}.csv", rows, bom=shape == "bom")
        if batch:
            prior = _read_batch(folder)
            _write_batch(folder, prior + asked, model)
    return root / shape


def _read_batch(folder: Path) -> list[tuple[str, str, str]]:
    """The requests already written for this folder (one batch per class folder)."""
    path = folder / "batch_input.jsonl"
    if not path.is_file():
        return []
    out_by_id = {}
    for line in (folder / "batch_output.jsonl").read_text().splitlines():
        item = json.loads(line)
        out_by_id[item["custom_id"]] = item["response"]["body"]["choices"][0]["message"]["content"]
    asked = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        msgs = item["body"]["messages"]
        asked.append((msgs[0]["content"], msgs[1]["content"], out_by_id[item["custom_id"]]))
    return asked


def batch_replies(folder: Path) -> dict[tuple[str, str], str]:
    """(system, prompt) -> the batch reply, over every batch file of a written shape."""
    out: dict[tuple[str, str], str] = {}
    for inp in folder.rglob("batch_input.jsonl"):
        for system, prompt, text in _read_batch(inp.parent):
            out[(system, prompt)] = text
    return out
