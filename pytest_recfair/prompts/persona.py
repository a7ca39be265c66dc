"""A persona in the recommender's own prompt (``role=``, issue 20 point 4): the list,
item and position audits run "as a sommelier" by opening their system message with
``You are a sommelier.``; the audit without ``role`` is the neutral one to compare with.
Pure: stdlib only.
"""

from __future__ import annotations

__all__ = ["persona_system"]


def persona_system(role: str, system: str | None) -> str:
    """``You are a(n) {role}.`` opening the case's own system message (the templates' or
    the ``system`` setting's), so the only difference from the neutral audit is the role."""
    name = " ".join(role.split())
    article = "an" if name[:1].casefold() in "aeiou" else "a"
    head = f"You are {article} {name}."
    return f"{head} {system}" if system else head
