"""The MetricsExpert skill is the catalogue: every metric in the markdown, labels from synonyms."""

from __future__ import annotations

import re

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.skill import metric_glossary, metrics_expert_markdown


def test_every_catalogue_metric_is_in_the_skill() -> None:
    cat = load_catalogue()
    text = metrics_expert_markdown(cat)
    named = set(re.findall(r"`([^`]+)`", text))
    lines = [line for line in text.splitlines() if line.startswith("- `")]
    folded = sum(int(m[1]) - 1 for line in lines
                 if (m := re.search(r"\((\d+) metrics, one per index\)", line)))  # fmt: skip
    # each line names one metric, or the first and last of a family of N
    assert len(lines) + folded == len(cat)
    for info in cat:
        family = re.sub(r"\d+", "#", info.name)
        assert info.name in named or any(re.sub(r"\d+", "#", n) == family for n in named)
    assert "`total_power` [W, every 20 s]" in text
    assert "## IPMI" in text and "## Weather" in text


def test_glossary_labels_name_one_metric_and_carry_units() -> None:
    cat = load_catalogue()
    glossary = metric_glossary(cat)
    assert set(glossary) == {info.name for info in cat}
    assert (glossary["total_power"].label, glossary["total_power"].unit) == ("node power", "W")
    assert glossary["ambient"].unit == "°C"
    # a label shared by several metrics would be ambiguous on an axis
    for name in ("Gpu0_gpu_utilization", "Gpu3_gpu_utilization"):
        assert [m.name for m in cat.find_synonym(glossary[name].label)] == [name]
