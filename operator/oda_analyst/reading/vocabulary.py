"""The analysis vocabulary (``ontology/analysis.yaml``) as one typed object.

Data, not regular expressions spread over modules: the reader builds its phrase matcher from
this, and a newcomer learns what a word means by reading the YAML file.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast, get_args

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.reading.model import CHART_KINDS, ChartKind, Statistic

_STATISTICS: tuple[str, ...] = get_args(Statistic)


@dataclass(frozen=True)
class Vocabulary:
    charts: tuple[tuple[ChartKind, tuple[str, ...]], ...]
    """Kinds, each with its phrases (lower case)."""
    unspecified: tuple[str, ...]
    statistics: tuple[tuple[Statistic, tuple[str, ...]], ...]
    report_verbs: tuple[str, ...]
    comparison: tuple[str, ...]
    comparatives: frozenset[str]

    def phrase(self, kind: ChartKind) -> str:
        """The first phrase naming a chart kind (how a chosen kind is written back)."""
        return dict(self.charts)[kind][0]


def _words(raw: object, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(w, str | int | float) for w in raw):
        raise TypeError(f"{where} must be a list of phrases")
    return tuple(str(w).lower() for w in raw)


def _load(path: Path) -> Vocabulary:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        charts = []
        for kind, phrases in raw["charts"].items():
            if kind not in CHART_KINDS:
                raise OntologyError(
                    f"{path}: unknown chart kind {kind!r}", hint=f"use one of {CHART_KINDS}"
                )
            charts.append((cast(ChartKind, kind), _words(phrases, f"charts.{kind}")))
        stats = []
        for name, phrases in raw["statistics"].items():
            if name not in _STATISTICS:
                raise OntologyError(
                    f"{path}: unknown statistic {name!r}", hint=f"use one of {_STATISTICS}"
                )
            stats.append((cast(Statistic, name), _words(phrases, f"statistics.{name}")))
        return Vocabulary(
            charts=tuple(charts),
            unspecified=_words(raw["unspecified"], "unspecified"),
            statistics=tuple(stats),
            report_verbs=_words(raw["report_verbs"], "report_verbs"),
            comparison=_words(raw["comparison"], "comparison"),
            comparatives=frozenset(_words(raw["comparatives"], "comparatives")),
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise OntologyError(
            f"cannot read the analysis vocabulary {path}: {err}",
            hint="check ODA_ONTOLOGY_DIR and that analysis.yaml has charts, unspecified, "
            "statistics, report_verbs, comparison and comparatives",
        ) from None


@lru_cache(maxsize=4)
def load_vocabulary(path: Path | None = None) -> Vocabulary:
    """The vocabulary of ``<ODA_ONTOLOGY_DIR>/analysis.yaml`` (read once per path)."""
    return _load(path or get_settings().ontology_dir / "analysis.yaml")
