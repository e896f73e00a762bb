"""Vague levels: "high GPU usage", "too much power", "hot nodes" without a number.

Answering such a question means choosing a threshold the operator did not give, and returning
every reading instead (or a guessed cut-off) answers another question. So stage 1 asks for the
threshold, with the unit of the metric, and resumes with the answer read as an explicit value
filter ("above 80 %"). Questions *about* the level ("how hot did node 9 get") and rankings
("the highest", "hotter than") are not vague; nor are data-centre terms ("hot aisle").
"""

from __future__ import annotations

import re

from oda_analyst.reading.rules.cues import has_value_filter

_LEVEL = re.compile(
    r"\b(?:(?:too|very|unusually|abnormally|excessively|extremely|dangerously|rather|quite)\s+)?"
    r"(?:high|low|hot|cold|warm|excessive|abnormal|anomalous|unusual|too\s+much|too\s+many"
    r"|too\s+little|spiky|spiking|poor|bad|good|inefficient|wasteful|heavy|light)\b"
    r"(?![\s-]*(?:aisles?|water|air|side|loop|plates?|memory|mem|priority)\b)",
    re.IGNORECASE,
)
_ABOUT_LEVEL = re.compile(r"\bhow\s+$", re.IGNORECASE)  # "how hot did it get": the level itself
# Units the planner's value filters understand, as an operator would write them.
_EXAMPLE_UNIT = {"%": "80 %", "°C": "30 °C", "C": "30 °C", "W": "1500 W"}


def vague_level(text: str) -> str | None:
    """The first vague level phrase of ``text`` when it states no explicit threshold."""
    if has_value_filter(text):
        return None
    for found in _LEVEL.finditer(text):
        if not _ABOUT_LEVEL.search(text[: found.start()]):
            return " ".join(found.group().split())
    return None


def threshold_question(phrase: str, unit: str | None) -> str:
    example = _EXAMPLE_UNIT.get(unit or "", "80 %")
    return (
        f"What counts as '{phrase}' here? Give a threshold with its unit, e.g. 'above {example}' "
        f"or 'below {example}'."
    )
