"""The MetricsExpert skill (paper §III-B d): the metric catalogue as the coordinator's reference.

A skill has no model, tools or loop of its own: it is background knowledge. Two forms, both
made from ``ontology/metrics.yaml`` so they never drift from what the retriever grounds against:

- ``metrics_expert_markdown`` — the markdown a model reads in the coordinator's system prompt:
  per plugin, each metric (families that differ only by an index, such as the 16 DIMM
  temperatures, on one line), its unit, sampling period and description.
- ``metric_glossary`` — the same knowledge as data for the rule path: the operator's words for
  each metric and its unit, which the chart recipes use as axis labels.

It lives in the ontology package because the coordinator may not import the catalogue (which
reads the lake's schema module): the process that wires the coordinator calls these functions and
hands it the results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue

_DIGITS = re.compile(r"\d+")
_NO_UNIT = frozenset({"", "1", "state", "count"})

PLUGIN_TITLES: dict[str, str] = {
    "ipmi": "IPMI (node BMC sensors: power, temperatures, fans)",
    "ganglia": "Ganglia (node OS and GPU counters)",
    "job_table": "Job table (Slurm accounting, one row per job state poll)",
    "nagios": "Nagios (service checks)",
    "schneider": "Schneider (electrical panels)",
    "slurm": "Slurm (scheduler and cluster-wide figures)",
    "vertiv": "Vertiv (cooling units)",
    "weather": "Weather (outside station)",
    "logics": "Logics (liquid cooling PLC)",
}


@dataclass(frozen=True)
class GlossaryEntry:
    """How the rule path names a metric on a chart."""

    label: str
    unit: str | None


def metric_label(info: MetricInfo, catalogue: Catalogue) -> str:
    """The metric in the operator's words: its first synonym that names it alone (a synonym
    shared by several metrics would be ambiguous on an axis), else its first synonym, else its
    name."""
    for phrase in info.synonyms:
        if [m.name for m in catalogue.find_synonym(phrase)] == [info.name]:
            return phrase
    return info.synonyms[0] if info.synonyms else info.name


def metric_glossary(catalogue: Catalogue | None = None) -> dict[str, GlossaryEntry]:
    """Every catalogue metric's label and unit (None when it has none worth printing)."""
    cat = catalogue or load_catalogue()
    return {
        info.name: GlossaryEntry(
            label=metric_label(info, cat), unit=None if info.unit in _NO_UNIT else info.unit
        )
        for info in cat
    }


def _family_key(info: MetricInfo) -> tuple[str, str, str, str]:
    return (info.plugin, _DIGITS.sub("#", info.name), info.unit, _DIGITS.sub("#", info.description))


def _period(info: MetricInfo) -> str:
    return "per job state poll" if info.period_s is None else f"every {info.period_s} s"


def _line(members: list[MetricInfo]) -> str:
    first = members[0]
    name = f"`{first.name}`"
    if len(members) > 1:
        name += f" … `{members[-1].name}` ({len(members)} metrics, one per index)"
    unit = first.unit or "text"
    return f"- {name} [{unit}, {_period(first)}]: {first.description}"


def _families(infos: Iterable[MetricInfo]) -> list[list[MetricInfo]]:
    groups: dict[tuple[str, str, str, str], list[MetricInfo]] = {}
    for info in infos:
        groups.setdefault(_family_key(info), []).append(info)
    return list(groups.values())


def metrics_expert_markdown(catalogue: Catalogue | None = None) -> str:
    """The MetricsExpert reference: plugins, metrics (index families folded), units, sampling
    periods and descriptions, as markdown."""
    cat = catalogue or load_catalogue()
    plugins = sorted({i.plugin for i in cat})
    out = [
        "# MetricsExpert: the M100 telemetry catalogue",
        "",
        "Use the exact metric names below when a request is ambiguous; the retriever grounds "
        "plain words against the same catalogue. Units are SI short forms; a period is the "
        "nominal sampling interval.",
    ]
    for plugin in plugins:
        out += ["", f"## {PLUGIN_TITLES.get(plugin, plugin)}", ""]
        out += [_line(members) for members in _families(cat.by_plugin(plugin))]
    return "\n".join(out) + "\n"
