"""The lexicon's day parts and synonyms are data: a site adds words in ontology/lexicon.yaml, and
a malformed entry is an error that names it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from oda_analyst.errors import OntologyError
from oda_analyst.reading.read import read
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.lexicon_data import (
    load_day_parts,
    load_qualities,
    load_synonyms,
    with_qualities,
    with_synonyms,
)

AS_OF = datetime(2022, 7, 5, 9, tzinfo=UTC)


def test_the_shipped_lexicon_loads() -> None:
    parts = load_day_parts()
    assert parts["lunchtime"].start == 12 and parts["lunchtime"].end == 14
    assert parts["first thing"].ask and not parts["afternoon"].ask
    assert load_synonyms()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("day_parts: {brunch: [10, 25]}\nsynonyms: {}\n", "brunch"),
        ("day_parts: {brunch: [11, 10]}\nsynonyms: {}\n", "brunch"),
        ("day_parts: {brunch: [10, 12, maybe]}\nsynonyms: {}\n", "brunch"),
        ("day_parts: {}\nsynonyms: {kicked off: [started]}\n", "kicked off"),
        ("synonyms: {}\n", "day_parts"),
    ],
)
def test_a_malformed_entry_is_named(tmp_path: Path, body: str, named: str) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text(body)
    with pytest.raises(OntologyError, match=named):
        load_day_parts(path)
        load_synonyms(path)


def test_synonyms_are_whole_phrases() -> None:
    assert with_synonyms("when did it kick off and wrap up") == "when did it start and end"
    assert with_synonyms("Kicked   off at 3") == "started at 3"
    assert with_synonyms("kickoff, gimmes") == "kickoff, gimmes"


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("when did job 7425385 kick off and when did it wrap up", ("start", "end")),
        ("5 longest failed jobs that kicked off on june 9", ("started",)),
        ("gimme total power for nodes 40 and 41 on 1 june", ("give me",)),
    ],
)
def test_the_reader_reads_synonyms_in_the_retrieval_words(question: str, words: tuple[str, ...]
                                                          ) -> None:  # fmt: skip
    said = read(question, AS_OF).retrieval
    assert said is not None
    assert all(w in said.text for w in words), said.text


def test_a_possessive_without_its_apostrophe_belongs_to_the_node() -> None:
    found = extract_entities("what was node 650s avg cpu system this arvo")
    assert found.nodes == (650,)
    (span,) = found.spans
    assert "what was node 650s avg cpu system this arvo"[slice(*span)] == "node 650s"


def test_a_quality_says_which_way_and_names_its_quantity_only_where_none_is_named() -> None:
    qualities = load_qualities()
    assert (
        qualities["windier"].quantity == "wind speed" and qualities["calmest"].direction == "down"
    )
    assert qualities["most erratic"].always and qualities["most erratic"].degree == "superlative"
    said = with_qualities("was it windier the first week of june or the second", named=False)
    assert said == "was it higher wind speed the first week of june or the second"
    assert with_qualities("which rack runs warmest by inlet temp", named=True) == (
        "which rack runs highest by inlet temp"
    )
    # 'the most erratic node' ranks by the spread whatever is named; 'how warm' at a clause's
    # end beside a named quantity asks only the figure; 'how hot is node 9' keeps its own rule
    assert with_qualities("which node was the most erratic", named=True) == (
        "which node was the highest std"
    )
    assert "how" not in with_qualities("which hour is warmest, and how warm", named=True)
    assert with_qualities("how hot is node 9", named=False) == "how hot is node 9"


def test_a_malformed_quality_is_named(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text("qualities: {wind speed: {up: [[windy, windier]]}}\n")
    with pytest.raises(OntologyError, match="wind speed"):
        load_qualities(path)


def test_everyday_words_of_operators_are_read_as_the_rules_words() -> None:
    # each was refused as an unknown word or a metric name
    assert with_synonyms("how many jobs launched last night") == "how many jobs started last night"
    assert with_synonyms("uh what was the inlet temp") == " what was the inlet temp"
    assert with_synonyms("pegged at 100% at some point") == "pegged at 100% at any point"
    assert with_synonyms("what was rack 30 pulling") == "what was rack 30 drawing"
    assert read("which nodes got really toasty this morning", AS_OF).retrieval is not None
    said = read("which nodes got really toasty on 1 june", AS_OF).retrieval
    assert said is not None and said.vague_spans
