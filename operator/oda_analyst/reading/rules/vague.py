"""Vague levels: "high GPU usage", "too much power", "hot nodes" without a number.

Answering such a question means choosing a threshold the operator did not give, and returning
every reading instead (or a guessed cut-off) answers another question. So stage 1 asks for the
threshold, with the unit of the metric, and resumes with the answer read as an explicit value
filter ("above 80 %"). Questions *about* the level ("how hot did node 9 get") and rankings
("the highest", "hotter than") are not vague; nor are data-centre terms ("hot aisle"). The
words are data: ``vague_levels`` in ``ontology/lexicon.yaml``.
"""

from __future__ import annotations

import re

from oda_analyst.reading.rules.cues import has_value_filter
from oda_analyst.reading.rules.lexicon_data import vague_pattern

_ABOUT_LEVEL = re.compile(r"\bhow\s+$", re.IGNORECASE)  # "how hot did it get": the level itself
# Units the planner's value filters understand, as an operator would write them.
_EXAMPLE_UNIT = {"%": "80 %", "°C": "30 °C", "C": "30 °C", "W": "1500 W"}


def _levels(text: str) -> list[re.Match[str]]:
    """The vague level phrases of ``text``, not those asking the level itself ('how hot')."""
    return [m for m in vague_pattern().finditer(text)
            if not _ABOUT_LEVEL.search(text[: m.start()])]  # fmt: skip


def vague_level(text: str) -> str | None:
    """The first vague level phrase of ``text`` when it states no explicit threshold."""
    if has_value_filter(text):
        return None
    found = _levels(text)
    return " ".join(found[0].group().split()) if found else None


def vague_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` says a level in words ('way too much', 'really' of 'really hot'), with or
    without a threshold beside it (a reply's 'above 55 °C' joins the question): words that name
    no metric. A level that hints at the quantity ('hot') is left to the metric's words."""
    return [(m.start(), m.start("hint") if m.group("hint") else m.end()) for m in _levels(text)]


def threshold_question(phrase: str, unit: str | None) -> str:
    example = _EXAMPLE_UNIT.get(unit or "", "80 %")
    return (
        f"What counts as '{phrase}' here? Give a threshold with its unit, e.g. 'above {example}' "
        f"or 'below {example}'."
    )
