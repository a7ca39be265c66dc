# conftest.py
"""A film recommender as it ships: retrieve from the catalogue, prompt, call the model
through the OpenAI SDK, parse, re-rank. recfair_http_client records the SDK's calls per
audit prompt; replays serve them and the pipeline's own code runs every time."""

import csv
import os
import re
from pathlib import Path

import httpx2
import pytest
from openai import OpenAI

from pytest_recfair.providers import CallableProvider

# The simulator by default (python -m pytest_recfair.sim --port 8808 --bias demo).
BASE_URL = os.environ.get("PIPELINE_BASE_URL", "http://127.0.0.1:8808/v1")
API_KEY = os.environ.get("PIPELINE_API_KEY", "sk-replay-needs-no-key")
MODEL = os.environ.get("PIPELINE_MODEL", "recfair-sim-1")

SYSTEM = "You recommend films from the Example Films catalogue. Answer with a numbered list."
with (Path(__file__).parent / "catalogue.csv").open(encoding="utf-8") as f:
    CATALOGUE = list(csv.DictReader(f))
IN_STOCK = {row["title"] for row in CATALOGUE if row["in_stock"] == "yes"}


def retrieve(prompt: str, limit: int = 10) -> list[str]:
    """Catalogue titles by the director the prompt names."""
    return [row["title"] for row in CATALOGUE if row["director"] in prompt][:limit]


def parse(text: str) -> list[str]:
    """The titles of a numbered list."""
    return re.findall(r"^\s*\d+[.)]\s*(.+?)\s*$", text, re.MULTILINE)


def rerank(titles: list[str]) -> list[str]:
    """Titles in stock first, each group in the model's order."""
    return sorted(titles, key=lambda title: title not in IN_STOCK)


@pytest.fixture(scope="session")
def recfair_recommender(recfair_http_client: httpx2.Client) -> CallableProvider:
    client = OpenAI(base_url=BASE_URL, api_key=API_KEY, http_client=recfair_http_client)

    def recommend(prompt: str) -> list[str] | str:
        context = "Titles from our catalogue that may fit: " + "; ".join(retrieve(prompt))
        reply = client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"{prompt}\n\n{context}"},
            ],
            temperature=0,
        )
        text = reply.choices[0].message.content or ""
        return rerank(parse(text)) or text  # no list (a refusal): the text, as it came

    return CallableProvider(recommend, model="example-films-pipeline")
