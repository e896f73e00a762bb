"""Stray words: one word of a question that no metric of the catalogue uses ("dump", "plot").

Decomposition keeps the content words a question does not explain away, so a verb of the
operator's ("dump every inlet temperature sample", "which nodes peaked highest in power") can
become a metric phrase of its own, fail grounding, and sink a question whose real metric was
found. Such a phrase is dropped, with a warning that names it, when it is a single word that no
metric name, description or synonym contains and another phrase of the question was grounded.
Words that select or negate ("first", "only", "except") are never dropped: losing them would
answer another question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from oda_analyst.reading.types import Phrase

_NEVER_DROP = frozenset(
    re.findall(
        r"\w+",
        """first last initial final latest earliest newest oldest start end beginning top bottom
        only not no none except excluding without unless but other others same different new old""",
    )
)
_CONJUNCTION = re.compile(r"\band\b|\bor\b|\bplus\b|,|&|/|\bas\s+well\s+as\b", re.IGNORECASE)


def is_stray(phrase: str, vocabulary: frozenset[str]) -> bool:
    """A single alphabetic word that no metric uses (``vocabulary``: ``Catalogue.vocabulary``)
    and that does not select or negate."""
    words = phrase.split()
    return (
        len(words) == 1
        and words[0].isalpha()
        and words[0] not in vocabulary
        and words[0] not in _NEVER_DROP
    )


def conjoined(question: str, phrases: Sequence[Phrase]) -> frozenset[str]:
    """Phrases listed with another by a conjunction ('power and X'; 'dump the X' is not): those
    were asked for, never stray."""
    out: set[str] = set()
    for a, b in pairwise(sorted(phrases, key=lambda p: p.start)):
        same_group = (a.group_start, a.group_end) == (b.group_start, b.group_end)
        if same_group and _CONJUNCTION.search(question[a.end : b.start]):
            out.update((a.text, b.text))
    return frozenset(out)
