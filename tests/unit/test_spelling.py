"""One-letter typos of known words are read as those words, and said; nothing else changes."""

from __future__ import annotations

import pytest

from oda_analyst.reading.rules import spelling
from oda_analyst.reading.rules.cues import read_intent
from oda_analyst.reading.rules.spelling import corrected


def test_a_level_typed_against_its_unit_is_the_level_and_the_unit() -> None:
    # blind4 B10, blind6 S25: '1500W' was a metric phrase; '2pm', 'p0', 'gpu0' stay
    assert corrected("nodes over 1500W at 2pm") == ("nodes over 1500 W at 2pm", ())
    assert corrected("p0 power above 1.5kW") == ("p0 power above 1.5 kW", ())
    assert corrected("gpu0 of node 5 above 35C") == ("gpu0 of node 5 above 35 C", ())


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("averge power of each node in rack 20", "average power of each node in rack 20"),
        ("how many jobs failled on 3 June", "how many jobs failed on 3 June"),
        ("how many diffrent users ran jobs", "how many different users ran jobs"),
        ("hotest outdoor temp in may", "hottest outdoor temp in may"),
        ("utilisation accross its 4 gpus", "utilisation across its 4 gpus"),
        ("tempreature of node 3", "temperature of node 3"),  # two letters swapped
        ("give me both numbers", "give me both number"),  # the plural of a known word
    ],
)
def test_a_typo_of_one_known_word_is_read_as_it_and_said(typed: str, read: str) -> None:
    text, notes = corrected(typed)
    assert text == read
    (note,) = notes
    assert note.startswith("read '")


@pytest.mark.parametrize(
    "text",
    [
        "coffee consumption of node 12",  # no known word one edit away: the accounting asks
        "Gpu0_gpu_utilizaton of node 3",  # part of a metric name: grounding judges it
        "power of node 900 on 1 June",  # short and known words stay
        "flux capacitor reading",
    ],
)
def test_other_words_stay_as_typed(text: str) -> None:
    assert corrected(text) == (text, ())


@pytest.mark.parametrize(
    "text",
    [
        "input power of the power supplies of node 7",  # 'supplies' was read as 'supplied'
        "keep track of the inlet temperature of node 4",  # 'track' is no typo of 'rack'
        "the nodes busier than node 12",
    ],
)
def test_an_ordinary_english_word_is_never_corrected_into_a_domain_word(text: str) -> None:
    assert corrected(text, frozenset({"supplied", "rack", "racks", "busies", "nodes"})) == (
        text,
        (),
    )
    assert corrected(text) == (text, ())


def test_an_equally_near_pair_is_not_guessed() -> None:
    # 'nodez' is one edit from 'nodes' only; 'rakcs' from 'racks' (swap); 'stat' is short
    vocab = frozenset({"tower", "power", "nodes", "racks"})
    assert corrected("lower", vocab) == ("lower", ())  # tower and power both one edit away
    assert corrected("nodez and rakcs", vocab)[0] == "nodes and racks"


@pytest.mark.parametrize(("word", "fn"), [("hottest", "max"), ("warmest", "max"),
                                          ("coldest", "min"), ("coolest", "min")])  # fmt: skip
def test_superlatives_without_a_ranking_are_the_statistic(word: str, fn: str) -> None:
    cues = read_intent(f"the {word} outdoor temperature in May 2022")
    assert [a.fn for a in cues.aggs] == [fn]


def test_a_rare_misspelling_in_the_english_list_is_read_as_the_known_word() -> None:
    # analysis5 V08: 'corelation' is in the English list (50 uses) and was left, so the
    # question was refused; 'track' is common English and stays (it is no typo of 'rack')
    known = frozenset({"correlation", "rack", "node"})
    assert spelling.correction("corelation", known) == "correlation"
    assert spelling.correction("track", known) is None
    assert spelling.correction("nodes", known) == "node"
