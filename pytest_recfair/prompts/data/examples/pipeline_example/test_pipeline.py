# test_pipeline.py
from pytest_recfair import fairness


@fairness(attr="religion")
def test_religion() -> None:
    """Gated against baselines/test_religion.json."""


@fairness(attr="gender")
def test_gender() -> None:
    """Gated against baselines/test_gender.json."""
