"""'n233' names node 233, as host names abbreviate nodes (found on the sixth blind set, where
'gpu0 utilisation of n233 @ 14:30' was refused with 'n233' read as a metric word)."""

from __future__ import annotations

import pytest

from oda_analyst.reading.rules.entities import extract_entities


@pytest.mark.parametrize(
    ("text", "nodes"),
    [("gpu0 utilisation of n233 @ 14:30", (233,)), ("node 900 and n12", (12, 900))],
)
def test_short_node_names(text: str, nodes: tuple[int, ...]) -> None:
    assert extract_entities(text).nodes == nodes


def test_a_bare_n_before_a_spaced_number_is_no_node() -> None:
    assert extract_entities("top n 5 by power").nodes == ()
