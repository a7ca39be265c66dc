"""A published prompt as a template: entity name -> ``{entity}``, value text -> ``{value}``.

Pure: stdlib only.
"""

from __future__ import annotations

__all__ = ["escape", "fill", "template_of"]


def escape(text: str) -> str:
    """Braces doubled, so a literal ``{`` in a published prompt survives ``str.format``."""
    return text.replace("{", "{{").replace("}", "}}")


def template_of(prompt: str, name: str, value: str | None) -> str | None:
    """The template ``prompt`` was filled from, or None when it lacks the name or value."""
    if name not in prompt:
        return None
    text = escape(prompt)
    if value is not None:
        at = text.find(escape(value))
        if at < 0:
            return None
        text = text[:at] + "{value}" + text[at + len(escape(value)) :]
    return text.replace(escape(name), "{entity}")


def fill(template: str, name: str, value: str | None) -> str:
    """The prompt ``template`` gives for ``name`` and ``value`` (what the audit will ask)."""
    text = template.replace("{entity}", "\0E").replace("{value}", "\0V")
    text = text.replace("{{", "{").replace("}}", "}")
    return text.replace("\0E", name).replace("\0V", value or "")
