"""The analysis vocabulary (``ontology/analysis.yaml``): which words start an analysis clause,
which phrases name which chart, which words ask for reported statistics.

Data, not regexes spread over modules: the planner reads this one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, cast, get_args

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError

ChartKind = Literal["histogram", "pie", "box", "heatmap", "dual_axis", "bar", "line"]
CHART_KINDS: tuple[ChartKind, ...] = get_args(ChartKind)

CHART_NAMES: dict[ChartKind, str] = {
    "line": "a line plot over time",
    "histogram": "a histogram",
    "dual_axis": "a dual-axis plot",
    "bar": "a bar chart",
    "pie": "a pie chart",
    "heatmap": "a correlation heatmap",
    "box": "a box plot",
}


@dataclass(frozen=True)
class Vocabulary:
    verbs: frozenset[str]
    charts: tuple[tuple[ChartKind, tuple[str, ...]], ...]
    """Kinds in precedence order, each with its phrases (lower case)."""
    reports: frozenset[str]


def _load(path: Path) -> Vocabulary:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        charts = []
        for kind, phrases in raw["charts"].items():
            if kind not in CHART_KINDS:
                raise OntologyError(
                    f"{path}: unknown chart kind {kind!r}", hint=f"use one of {CHART_KINDS}"
                )
            charts.append((cast(ChartKind, kind), tuple(str(p).lower() for p in phrases)))
        return Vocabulary(
            verbs=frozenset(str(v).lower() for v in raw["verbs"]),
            charts=tuple(charts),
            reports=frozenset(str(r).lower() for r in raw["reports"]),
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise OntologyError(
            f"cannot read the analysis vocabulary {path}: {err}",
            hint="check ODA_ONTOLOGY_DIR and that analysis.yaml has verbs, charts and reports",
        ) from None


@lru_cache(maxsize=4)
def load_vocabulary(path: Path | None = None) -> Vocabulary:
    """The vocabulary of ``<ODA_ONTOLOGY_DIR>/analysis.yaml`` (read once per path)."""
    return _load(path or get_settings().ontology_dir / "analysis.yaml")
