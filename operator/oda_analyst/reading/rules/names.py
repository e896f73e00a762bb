"""Exact catalogue metric names written in a question ('Gpu0_gpu_utilization', 'Pue',
'cluster CPU utilisation (cluster_cpu_util)'): such a name is the metric, whatever its words
would have matched."""

from __future__ import annotations

import re
from dataclasses import replace

from oda_analyst.ontology.catalogue import Catalogue
from oda_analyst.reading.types import Chunking


def named_metrics(chunking: Chunking, catalogue: Catalogue) -> tuple[Chunking, dict[str, str]]:
    """Phrases written as an exact catalogue metric name, and the chunking without the phrases
    such a name glosses.

    A name counts when written exactly (case-sensitive) and it reads as a name: it has ``_``,
    ``.`` or a digit, an upper-case letter not at the start of the question (``Pue``, not
    'Status of …'), or it stands in parentheses. A parenthesised name right after a phrase
    names that phrase's metric (``cluster CPU utilisation (cluster_cpu_util)``): the phrase is
    dropped, so the name wins over what the words would have matched.
    """
    q = chunking.question
    named: dict[str, str] = {}
    dropped: set[int] = set()
    for p in chunking.phrases:
        raw = q[p.start : p.end].strip()
        glossed = q[: p.start].rstrip().endswith("(") and q[p.end :].lstrip().startswith(")")
        looks_named = bool(re.search(r"[_.\d]", raw)) or (
            raw != raw.lower() and bool(q[: p.start].strip())
        )
        if raw not in catalogue or not (glossed or looks_named):
            continue
        named[p.text] = raw
        before = [j for j, b in enumerate(chunking.phrases) if b.end <= p.start]
        if glossed and before:
            between = q[chunking.phrases[before[-1]].end : p.start]
            if not re.search(r"[,;]|\b(?:and|or|as well as)\b", between, re.IGNORECASE):
                dropped.add(before[-1])
    phrases = tuple(p for j, p in enumerate(chunking.phrases) if j not in dropped)
    return replace(chunking, phrases=phrases), named
