"""Colloquial days and hours operators type: 'yday', 'wed', 'last sunday', 'the 5th',
'yesterday 8-9', '10 o'clock yesterday morning'.

Found on the sixth blind set: each of these was either left unread (the accounting refused the
question, quoting the word) or read as a different window (the whole day for 'yesterday 8-9').
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.timeparse import parse_time

THU = datetime(2022, 6, 2, 9, tzinfo=UTC)  # a Thursday
SUN = datetime(2022, 6, 12, 12, tzinfo=UTC)  # a Sunday


def windows(text: str, as_of: datetime = THU) -> list[tuple[str, str]]:
    parsed = parse_time(text, as_of=as_of)
    assert parsed.status == "ok", parsed
    return [(f"{w.start:%m-%d %H:%M}", f"{w.end:%m-%d %H:%M}") for w in parsed.windows]


@pytest.mark.parametrize(
    ("text", "as_of", "want"),
    [
        ("inlet temp on node 17 yday", THU, ("06-01 00:00", "06-02 00:00")),
        ("avg inlet temp, 2pm-3pm wed", THU, ("06-01 14:00", "06-01 15:00")),
        ("jobs on monday", SUN, ("06-06 00:00", "06-07 00:00")),
        ("jobs on sunday", SUN, ("06-12 00:00", "06-13 00:00")),  # the reference day itself
        ("jobs last sunday", SUN, ("06-05 00:00", "06-06 00:00")),  # not the reference day
        ("power last sunday", THU, ("05-29 00:00", "05-30 00:00")),
        ("users running on the 5th", SUN, ("06-05 00:00", "06-06 00:00")),
        ("users running on the 20th", SUN, ("05-20 00:00", "05-21 00:00")),  # not yet this month
        ("mean inlet temp yesterday 8-9", THU, ("06-01 08:00", "06-01 09:00")),
        ("inlet above 40°C 8-9 yesterday", THU, ("06-01 08:00", "06-01 09:00")),
        ("jobs running yday 2-4pm", THU, ("06-01 14:00", "06-01 16:00")),
        ("PUE at 10 o'clock yesterday morning", THU, ("06-01 10:00", "06-01 10:00")),
        ("PUE at 3 o'clock yesterday afternoon", THU, ("06-01 15:00", "06-01 15:00")),
        # blind8 U03: 'half past eight' was asked about as a metric
        ("PUE at half past eight yesterday morning", THU, ("06-01 08:30", "06-01 08:30")),
        ("PUE at quarter to 9 pm yesterday", THU, ("06-01 20:45", "06-01 20:45")),
        ("PUE at a quarter past ten yesterday", THU, ("06-01 10:15", "06-01 10:15")),
        ("peak cpu on node 640 last night between 1 and 3", THU, ("06-02 01:00", "06-02 03:00")),
        ("max inlet last night between 22:00 and 23:00", THU, ("06-01 22:00", "06-01 23:00")),
        # blind8 U18: the numbers after the clock ('gpu1', 'node 3') are no night hours
        (
            "last night 22:00 to midnight, averge gpu1 utilization on node 150?",
            THU,
            ("06-01 22:00", "06-02 00:00"),
        ),
        ("power last night 22:00 to 23:00 on node 3", THU, ("06-01 22:00", "06-01 23:00")),
    ],
)
def test_colloquial_days_and_hours(text: str, as_of: datetime, want: tuple[str, str]) -> None:
    assert windows(text, as_of) == [want]


def test_numbers_after_an_entity_noun_stay_ids_beside_a_day() -> None:
    assert windows("nodes 10-14 yesterday") == [("06-01 00:00", "06-02 00:00")]


@pytest.mark.parametrize("text", ["sat at 100% gpu", "the sun was out", "wed to the old rules"])
def test_weekday_abbreviations_inside_a_sentence_are_words(text: str) -> None:
    parsed = parse_time(text, as_of=THU)
    assert not parsed.windows, parsed


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # one range, not its two end days (two windows answered one after the other)
        ("OOM kills from the 6th to the 9th of June 2022", [("06-06 00:00", "06-10 00:00")]),
        ("between the 3rd and the 5th of june", [("06-03 00:00", "06-06 00:00")]),
        ("the 5th to the 7th of June", [("06-05 00:00", "06-08 00:00")]),
        # two days named apart stay two days
        ("the 5th and the 7th", [("06-05 00:00", "06-06 00:00"), ("06-07 00:00", "06-08 00:00")]),
    ],
)
def test_ordinal_day_ranges(text: str, want: list[tuple[str, str]]) -> None:
    assert windows(text, SUN) == want


THU_11 = datetime(2022, 6, 2, 11, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "as_of", "want"),
    [
        # blind7 T04: the '3' was left unread (refused)
        ("air temperature at 3 in the afternoon on june 1st", SUN, ("06-01 15:00", "06-01 15:00")),
        ("power at 9 this evening", SUN, ("06-12 21:00", "06-12 21:00")),
        ("power at 10 in the morning on 1 june", SUN, ("06-01 10:00", "06-01 10:00")),
        # blind7 T12: 'first' was read as a metric word
        ("p95 of total power 12:00-12:30 on the first", THU_11, ("06-01 12:00", "06-01 12:30")),
        ("jobs on the third", SUN, ("06-03 00:00", "06-04 00:00")),
        # blind7 T51: the '9' and '10' were left unread
        (
            "gpu3 utilisation of node 61 this morning 9 to 10",
            THU_11,
            ("06-02 09:00", "06-02 10:00"),
        ),
        ("power yesterday afternoon 2-3", THU_11, ("06-01 14:00", "06-01 15:00")),
        # nodes before a part of the day stay nodes
        ("nodes 10-14 this morning", THU_11, ("06-02 00:00", "06-02 12:00")),
    ],
)
def test_hours_named_with_a_part_of_the_day(text: str, as_of: datetime, want: tuple[str, str]
                                            ) -> None:  # fmt: skip
    assert windows(text, as_of) == [want]


LATE = datetime(2022, 6, 3, 23, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "as_of", "want"),
    [
        # word clocks end a window: 'till ten' was left over (09:45 read as one instant)
        ("power of node 7 from quarter to ten till ten on 3 June 2022", THU,
         ("06-03 09:45", "06-03 10:00")),
        ("power of node 7 from 07:30 till 9 on 3 june 2022", THU, ("06-03 07:30", "06-03 09:00")),
        ("power of node 7 on 3 june 2022 until eleven", THU, ("06-03 00:00", "06-03 11:00")),
        # 'half seven' is half past seven, as said in Britain
        ("power of node 7 at half seven pm on 3 june 2022", THU, ("06-03 19:30", "06-03 19:30")),
        ("power of node 7 on 3 june 2022 from half six till half seven pm", THU,
         ("06-03 18:30", "06-03 19:30")),
        # a pm on the end holds for a bare start, never for a 24-hour one
        ("power of node 7 on 3 june 2022 from 8:00 to 9pm", THU, ("06-03 20:00", "06-03 21:00")),
        ("power of node 7 on 3 june 2022 from 08:00 to 9pm", THU, ("06-03 08:00", "06-03 21:00")),
        # 'tonight' is this evening; hours beside it narrow it
        ("gpu util of node 7 tonight", LATE, ("06-03 18:00", "06-04 00:00")),
        ("gpu util of node 7 tonight 20-22h", LATE, ("06-03 20:00", "06-03 22:00")),
        # a day after the month is the date: the pair before it are hours, not days 9-11
        ("power of node 7 between 9 and 11 jun 3", SUN, ("06-03 09:00", "06-03 11:00")),
        ("power of node 7 from 9 to 11 june 3rd 2022", SUN, ("06-03 09:00", "06-03 11:00")),
        ("power of node 7 between 9 and 11 june 2022", SUN, ("06-09 00:00", "06-12 00:00")),
    ],
)  # fmt: skip
def test_colloquial_clocks(text: str, as_of: datetime, want: tuple[str, str]) -> None:
    assert windows(text, as_of) == [want]


MORNING_AFTER = datetime(2022, 6, 2, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "as_of", "want"),
    [
        # one window across midnight, not 'night' (00:00-06:00) plus today's 23:00-03:00
        ("jobs started last night from 11pm till 3am", MORNING_AFTER,
         ("06-01 23:00", "06-02 03:00")),
        ("power of node 7 on 3 june 2022 8h-10h", THU, ("06-03 08:00", "06-03 10:00")),
        ("power of node 7 on 3 june 2022 14-16h", THU, ("06-03 14:00", "06-03 16:00")),
    ],
)  # fmt: skip
def test_one_window_across_midnight_and_24_hour_h(
    text: str, as_of: datetime, want: tuple[str, str]
) -> None:
    assert windows(text, as_of) == [want]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # each was one instant (a statistic then asked for a window, or a value at noon)
        ("nodes above 300 W the whole 9 o'clock hour on 3 june 2022",
         ("06-03 09:00", "06-03 10:00")),
        ("jobs started per hour on 3 june 2022 between 7 and noon", ("06-03 07:00", "06-03 12:00")),
        ("power of node 7 on 3 june 2022 from 5 to noon", ("06-03 05:00", "06-03 12:00")),
        ("power of node 7, 3 june 2022 noon to 2", ("06-03 12:00", "06-03 14:00")),
        ("power of node 7 on 3 june 2022 noon till 4", ("06-03 12:00", "06-03 16:00")),
    ],
)  # fmt: skip
def test_noon_and_the_oclock_hour_bound_windows(text: str, want: tuple[str, str]) -> None:
    assert windows(text, THU) == [want]


def test_hours_just_before_a_date_are_that_days_hours_not_node_ids() -> None:
    """'node 44, 9-12 jun 2' read 9-12 as nodes 9 to 12 (four nodes nobody asked for)."""
    text = "power of node 44, 9-12 jun 2"
    assert windows(text, SUN) == [("06-02 09:00", "06-02 12:00")]
    assert extract_entities(text).nodes == (44,)
    assert extract_entities("power of nodes 9-12 jun 2").nodes == (9, 10, 11, 12)


def test_a_list_of_ids_going_on_before_a_date_stays_ids() -> None:
    """'nodes 0, 1 and 20, 1 Jun 2022 …' (as understood_as writes it) are three nodes, not the
    hours 01:00-20:00 (found when the sentence was read back)."""
    text = "power of nodes 0, 1 and 20, 1 Jun 2022 00:00 to 2 Jun 2022 00:00 UTC"
    assert windows(text, SUN) == [("06-01 00:00", "06-02 00:00")]
    assert extract_entities(text).nodes == (0, 1, 20)


JUNE_5 = datetime(2022, 7, 5, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "as_of", "want"),
    [
        # a part of the day beside hours only says which half they are in; 'midnight' and '8pm'
        # were moved twelve hours on by 'evening' (the next day 08:00-12:00, silently)
        ("hourly PUE on june 1, late evening from 8pm to midnight", JUNE_5,
         ("06-01 20:00", "06-02 00:00")),
        ("hourly PUE on june 1, evening from 8pm to midnight", JUNE_5,
         ("06-01 20:00", "06-02 00:00")),
        ("idle node count jun 1 first thing, 6 till 9", JUNE_5, ("06-01 06:00", "06-01 09:00")),
        ("max power of rack 7 over lunchtime jun 1 (12 till 2)", JUNE_5,
         ("06-01 12:00", "06-01 14:00")),
        ("PUE june 1 afternoon 2 to 4", JUNE_5, ("06-01 14:00", "06-01 16:00")),
        # parts said alone are their hours (ontology/lexicon.yaml, day_parts)
        ("avg cpu system of node 650 this arvo", datetime(2022, 6, 1, 18, 30, tzinfo=UTC),
         ("06-01 12:00", "06-01 18:00")),
        ("PUE over lunch on june 1", JUNE_5, ("06-01 12:00", "06-01 14:00")),
        ("PUE on june 1 in the small hours", JUNE_5, ("06-01 00:00", "06-01 06:00")),
        # minutes past an hour, and an edge of a day said twice is one window
        ("inlet temp on node 233 at ten past 7 on jun 1", JUNE_5, ("06-01 07:10", "06-01 07:10")),
        ("inlet temp on node 233 at 20 minutes to 8 on jun 1", JUNE_5,
         ("06-01 07:40", "06-01 07:40")),
        ("ICT power, last half hour of june 1 (23:30 to midnight)", JUNE_5,
         ("06-01 23:30", "06-02 00:00")),
        ("PUE reading at half past midnight on the 1st of june", JUNE_5,
         ("06-01 00:30", "06-01 00:30")),
        ("jobs started between midnight and 6 on june 4", JUNE_5, ("06-04 00:00", "06-04 06:00")),
        ("peak cpu util late evening jun 1, 8pm till midnight", JUNE_5,
         ("06-01 20:00", "06-02 00:00")),
        ("psu power below 174 W on june 1, 6 till 9 in the morning", JUNE_5,
         ("06-01 06:00", "06-01 09:00")),
    ],
)  # fmt: skip
def test_parts_of_the_day_and_minutes_past(text: str, as_of: datetime, want: tuple[str, str]
                                           ) -> None:  # fmt: skip
    assert windows(text, as_of) == [want]


def test_a_part_of_the_day_with_no_agreed_hours_is_asked_about() -> None:
    parsed = parse_time("PUE on june 1 first thing", as_of=JUNE_5)
    assert parsed.status == "unparseable"
    assert "first thing" in parsed.message and "6 till 9" in parsed.message


def test_descending_hours_stay_unread_without_a_part_past_noon() -> None:
    parsed = parse_time("power of node 7 on june 1 12-4", as_of=JUNE_5)
    assert [(w.end - w.start).days for w in parsed.windows] == [1]  # '12-4' not read
