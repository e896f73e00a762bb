"""Question sets as data (``bench/sets/*.yaml``, the dev set's format).

A set: ``version``, ``default_as_of``, ``questions``: each with ``id``, ``category``, ``text``,
optional ``as_of``, optional ``clarify`` (what the user answers if the backend asks) and
``expect`` (an oracle spec of ``bench/devset/oracle.py``, ``results: [...]`` for several, or a
status / no-data expectation). End-to-end questions add ``analysis``: ``statistic`` (what
must be reported) and ``plot`` (the kind of figure asked, or ``none``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from devset import oracle

SETS = Path(__file__).resolve().parents[1] / "sets"
SET_FILES = {"e2e": SETS / "appendix_a.yaml", "retrieval": SETS / "retrieval.yaml"}


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    text: str
    as_of: datetime
    expect: dict[str, Any]
    clarify: str | None = None
    analysis: dict[str, Any] = field(default_factory=dict)


def load_set(path: Path) -> list[Item]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    default = oracle.utc(str(data["default_as_of"]))
    items = []
    for q in data["questions"]:
        as_of = oracle.utc(str(q["as_of"])) if "as_of" in q else default
        items.append(
            Item(
                str(q["id"]),
                str(q.get("category", "")),
                str(q["text"]),
                as_of,
                dict(q["expect"]),
                q.get("clarify"),
                dict(q.get("analysis") or {}),
            )
        )
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: question ids repeat")
    return items
