"""The reader's part of a question, for tests of the parts that take it (grounding, stage 1)."""

from __future__ import annotations

from datetime import UTC, datetime

from oda_analyst.reading.model import RetrievalReading
from oda_analyst.reading.read import read

AS_OF = datetime(2022, 6, 13, tzinfo=UTC)


def said(question: str, as_of: datetime = AS_OF) -> RetrievalReading:
    """What the rules read in ``question`` (its retrieval words)."""
    reading = read(question, as_of)
    assert reading.retrieval is not None
    return reading.retrieval
