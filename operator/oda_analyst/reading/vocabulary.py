"""The analysis vocabulary (``ontology/analysis.yaml``) as one typed object.

Data, not regular expressions spread over modules: the reader builds its phrase matcher from
this, and a newcomer learns what a word means by reading the YAML file.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast, get_args

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.reading.model import CHART_KINDS, ChartKind, Statistic

_STATISTICS: tuple[str, ...] = get_args(Statistic)


@dataclass(frozen=True)
class AnomalyWords:
    """The words around an anomalies phrase that belong to it (``anomaly_words``)."""

    before: frozenset[str]
    side: tuple[tuple[str, frozenset[str]], ...]
    """'above' / 'below' / 'both' -> the words saying it."""
    mean: frozenset[str]
    mean_heads: frozenset[str]

    def side_of(self, word: str) -> str | None:
        return next((side for side, words in self.side if word in words), None)


@dataclass(frozen=True)
class Vocabulary:
    charts: tuple[tuple[ChartKind, tuple[str, ...]], ...]
    """Kinds, each with its phrases (lower case)."""
    unspecified: tuple[str, ...]
    statistics: tuple[tuple[Statistic, tuple[str, ...]], ...]
    report_verbs: tuple[str, ...]
    declined: tuple[str, ...]
    """Phrases saying no chart is wanted ('no chart needed')."""
    comparison: tuple[str, ...]
    comparatives: frozenset[str]
    clause_verbs: frozenset[str]
    anomaly: AnomalyWords

    def phrase(self, kind: ChartKind) -> str:
        """The first phrase naming a chart kind (how a chosen kind is written back)."""
        return dict(self.charts)[kind][0]


def _words(raw: object, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(w, str | int | float) for w in raw):
        raise TypeError(f"{where} must be a list of phrases")
    return tuple(str(w).lower() for w in raw)


def _keyed(raw: Any, allowed: tuple[str, ...], section: str, path: Path
           ) -> tuple[tuple[str, tuple[str, ...]], ...]:  # fmt: skip
    """A section of name -> phrases, every name one the code knows."""
    out = []
    for name, phrases in raw.items():
        if name not in allowed:
            raise OntologyError(f"{path}: unknown {section} entry {name!r}",
                                hint=f"use one of {allowed}")  # fmt: skip
        out.append((str(name), _words(phrases, f"{section}.{name}")))
    return tuple(out)


def _anomaly_words(raw: Any, path: Path) -> AnomalyWords:
    sides = _keyed(raw["side"], ("above", "below", "both"), "anomaly_words.side", path)
    return AnomalyWords(
        before=frozenset(_words(raw["before"], "anomaly_words.before")),
        side=tuple((name, frozenset(words)) for name, words in sides),
        mean=frozenset(_words(raw["mean"], "anomaly_words.mean")),
        mean_heads=frozenset(_words(raw["mean_heads"], "anomaly_words.mean_heads")),
    )


def _load(path: Path) -> Vocabulary:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        charts = _keyed(raw["charts"], CHART_KINDS, "charts", path)
        stats = _keyed(raw["statistics"], _STATISTICS, "statistics", path)
        return Vocabulary(
            charts=cast(tuple[tuple[ChartKind, tuple[str, ...]], ...], charts),
            unspecified=_words(raw["unspecified"], "unspecified"),
            statistics=cast(tuple[tuple[Statistic, tuple[str, ...]], ...], stats),
            report_verbs=_words(raw["report_verbs"], "report_verbs"),
            declined=_words(raw["declined"], "declined"),
            comparison=_words(raw["comparison"], "comparison"),
            comparatives=frozenset(_words(raw["comparatives"], "comparatives")),
            clause_verbs=frozenset(_words(raw["clause_verbs"], "clause_verbs")),
            anomaly=_anomaly_words(raw["anomaly_words"], path),
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise OntologyError(
            f"cannot read the analysis vocabulary {path}: {err}",
            hint="check ODA_ONTOLOGY_DIR and that analysis.yaml has charts, unspecified, "
            "statistics, declined, report_verbs, comparison, comparatives, clause_verbs and "
            "anomaly_words",
        ) from None


@lru_cache(maxsize=4)
def load_vocabulary(path: Path | None = None) -> Vocabulary:
    """The vocabulary of ``<ODA_ONTOLOGY_DIR>/analysis.yaml`` (read once per path)."""
    return _load(path or get_settings().ontology_dir / "analysis.yaml")
