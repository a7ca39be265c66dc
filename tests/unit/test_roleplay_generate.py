"""The bundled 'default' role-play set: the hand-written smoke set plus generated Yes/No
questions (tools/roles_generate.py), written out as data."""

from __future__ import annotations

from collections import Counter
from importlib import resources

from pytest_recfair.prompts.roles import ATTRIBUTES, load_roles, strip_role
from tools.roles_generate import default_text, templates


def test_the_bundled_file_is_the_generators_output() -> None:
    """Edit the templates or smoke.yaml, then regenerate: the file never drifts."""
    node = resources.files("pytest_recfair.prompts").joinpath("data", "roleplay", "default.yaml")
    assert node.read_text(encoding="utf-8") == default_text(), (
        "default.yaml is stale: run python tools/roles_generate.py"
    )


def test_default_set_has_200_yesno_questions_per_attribute_and_keeps_the_smoke_set() -> None:
    default, smoke = load_roles("default"), load_roles("smoke")
    assert not default.skipped
    counts = Counter((q.attribute, q.qtype) for q in default)
    t = templates()
    per_attribute = 4 * 2 * len(t["traits"]) * 2  # roles x pairs x traits x both orders
    for attribute in ATTRIBUTES:
        assert counts[(attribute, "yesno")] == 8 + per_attribute == 200
        assert counts[(attribute, "choice")] == counts[(attribute, "why")] == 8
    # the hand-written questions first, unchanged (same ids: cassettes and baselines key
    # on them), and every id unique
    assert default.questions[: len(smoke)] == smoke.questions
    assert len({q.id for q in default}) == len(default) == 2376
    # the same roles; every generated question carries the role statement the
    # without-role variant removes
    assert {q.role for q in default} == {q.role for q in smoke}
    generated = default.questions[len(smoke) :]
    assert all(strip_role(q.question) != q.question for q in generated)
    assert all(q.question.endswith("?") and "{" not in q.question for q in generated)
