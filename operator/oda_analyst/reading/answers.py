"""Replies to a clarification, read by the same rules as the question.

A reply names what the question left open: entities ("nodes 12 and 13"), a time window ("from
08:00 to 09:00", or the number of a window offered), the day of hours said with no day ("1 June"
for "between 2 and 3pm"). A reply that completes the question itself
(a metric, a threshold) is read with the question (``read.completed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from oda_analyst.errors import UsageError
from oda_analyst.reading.model import Problem, RetrievalReading
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.timeparse import parse_time
from oda_analyst.reading.types import Entities, ParsedWindow, TimeParse


def entities_of_reply(reply: str) -> Entities | Problem:
    """The entities a reply names, or why one cannot be (an id no lake holds)."""
    try:
        return extract_entities(reply)
    except UsageError as err:
        return Problem(message=err.message, hint=err.hint)


def phrases_of(text: str) -> list[str]:
    """The metric phrases of a model's sub-query ('the inlet temperature of node 900'), read by
    the rules that read the question's."""
    try:
        found = extract_entities(text)
    except UsageError:
        found = Entities()
    return [p.text for p in chunk(text, found).phrases]


def time_of_reply(reply: str, as_of: datetime, offered: Sequence[ParsedWindow]) -> TimeParse:
    """The window a reply gives: a window in words, or the number of one of ``offered``."""
    again = parse_time(reply, as_of=as_of)
    if again.status == "ok" or not offered:
        return again
    choice = reply.strip().rstrip(".")
    if choice.isdigit() and 1 <= int(choice) <= len(offered):
        return TimeParse((offered[int(choice) - 1],), "ok")
    return again


def hours_on_day(said: RetrievalReading, reply: str, as_of: datetime) -> TimeParse | None:
    """The question's hours on the day a reply names ('between 2 and 3pm' and '1 June'), read
    as one phrase; None when the two do not make a window."""
    joined = parse_time(f"{said.text}, on {reply}", as_of=as_of)
    return joined if joined.status == "ok" else None
