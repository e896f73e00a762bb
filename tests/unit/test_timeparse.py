"""The deterministic time-window parser: the paper's 14 questions, the issue's phrases, failures."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.reading.rules.timeparse import parse_time, time_spans
from oda_analyst.reading.types import ParsedWindow, TimeParse

# A Wednesday; the questions of Appendix A all write their year, so it only matters for relatives.
AS_OF = datetime(2022, 6, 15, 12, 30, tzinfo=UTC)


def t(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


def spans_of(result: TimeParse) -> list[tuple[datetime, datetime]]:
    return [(w.start, w.end) for w in result.windows]


# Appendix A, with the windows worked out by hand (None: the question needs no window of its own).
APPENDIX_A: list[tuple[str, str, list[tuple[str, str]], str | None]] = [
    ("Q1", "How many nodes are there in M100?", [], None),
    (
        "Q2",
        "Retrieve the total power consumption for node 900 from 1 June 2022 20:00 to 23:59 and "
        "plot the time series.",
        [("2022-06-01T20:00", "2022-06-02T00:00")],
        None,
    ),
    (
        "Q3",
        "Retrieve GPU-0 utilisation for nodes 900 and 920 on 1 June 2022 from 08:00 to 15:00 and "
        "create a line plot comparing the nodes.",
        [("2022-06-01T08:00", "2022-06-01T15:00")],
        None,
    ),
    (
        "Q4",
        "Retrieve the inlet temperature for all nodes on 1 June 2022 between 08:00–09:00 and "
        "create a histogram of the temperature distribution.",
        [("2022-06-01T08:00", "2022-06-01T09:00")],
        None,
    ),
    (
        "Q5",
        "Retrieve ambient temperature for nodes 301 and 318 on 1 June 2022 from 08:00–15:00 and "
        "create a single comparative line plot.",
        [("2022-06-01T08:00", "2022-06-01T15:00")],
        None,
    ),
    (
        "Q6",
        "Retrieve temperature and power for node 900 on 1 June 2022 (full day) and create a "
        "dual-axis plot over time.",
        [("2022-06-01T00:00", "2022-06-02T00:00")],
        None,
    ),
    (
        "Q7",
        "Compute the coefficient of variation of GPU utilisation for jobs 3423336, 4835969, "
        "3776044 over their whole duration and create a comparative bar chart.",
        [],
        None,
    ),
    (
        "Q8",
        "Get the total CPU and GPU hours consumed on the morning of 1 June 2022 and create a pie "
        "chart of the breakdown.",
        [("2022-06-01T00:00", "2022-06-01T12:00")],
        None,
    ),
    (
        "Q9",
        "For the top-3 longest single-node jobs on 1 June 2022, retrieve their power consumption, "
        "create a comparative line plot, and report min/max/avg power.",
        [("2022-06-01T00:00", "2022-06-02T00:00")],
        None,
    ),
    (
        "Q10",
        "Retrieve the average system-level CPU and GPU utilisation on 1 June 2022 between "
        "15:00–16:00 and create a side-by-side bar chart.",
        [("2022-06-01T15:00", "2022-06-01T16:00")],
        None,
    ),
    (
        "Q11",
        "Retrieve the daily average temperature from the weather plugin for the first week of "
        "June 2022 and compare it with the same period of the previous month using a dual-axis "
        "plot.",
        [("2022-06-01T00:00", "2022-06-08T00:00"), ("2022-05-01T00:00", "2022-05-08T00:00")],
        "day",
    ),
    (
        "Q12",
        "Get the number of jobs executed each day over 1–10 June 2022 and plot it over the 10 "
        "days.",
        [("2022-06-01T00:00", "2022-06-11T00:00")],
        "day",
    ),
    (
        "Q13",
        "For node 900 on 1 June 2022, get ambient temperature, system CPU, GPU-0–4 utilisation, "
        "and total power from 12:00 to 14:00 and visualise a heatmap correlation matrix.",
        [("2022-06-01T12:00", "2022-06-01T14:00")],
        None,
    ),
    (
        "Q14",
        "Fetch power consumption and users on 1 June 2022 and create a box plot of the top-10 "
        "users by number of jobs and average power consumption.",
        [("2022-06-01T00:00", "2022-06-02T00:00")],
        None,
    ),
]


@pytest.mark.parametrize(("qid", "question", "expected", "grain"), APPENDIX_A, ids=lambda v: v)
def test_appendix_a_windows(
    qid: str, question: str, expected: list[tuple[str, str]], grain: str | None
) -> None:
    result = parse_time(question, as_of=AS_OF)
    if not expected:
        assert result.status == "missing", qid
        assert result.windows == ()
        assert result.message
        return
    assert result.status == "ok", (qid, result.message)
    assert spans_of(result) == [(t(a), t(b)) for a, b in expected]
    assert all(w.granularity_hint == grain for w in result.windows)


def test_appendix_a_window_texts_name_the_phrases() -> None:
    q2 = parse_time(APPENDIX_A[1][1], as_of=AS_OF)
    assert q2.windows[0].text == "from 1 June 2022 20:00 to 23:59"
    q13 = parse_time(APPENDIX_A[12][1], as_of=AS_OF)
    # the date and the clock range are apart: both phrases, not the entity text between them
    assert q13.windows[0].text == "on 1 June 2022 from 12:00 to 14:00"
    q11 = parse_time(APPENDIX_A[10][1], as_of=AS_OF)
    assert [w.text for w in q11.windows] == [
        "for the first week of June 2022",
        "the same period of the previous month",
    ]


@pytest.mark.parametrize(
    ("phrase", "as_of", "start", "end"),
    [
        ("from 1 June 2022 20:00 to 23:59", AS_OF, "2022-06-01T20:00", "2022-06-02T00:00"),
        ("on 1 June 2022 (full day)", AS_OF, "2022-06-01T00:00", "2022-06-02T00:00"),
        ("on 1 June 2022 between 08:00–09:00", AS_OF, "2022-06-01T08:00", "2022-06-01T09:00"),
        ("between 08:00–09:00", AS_OF, "2022-06-15T08:00", "2022-06-15T09:00"),  # as_of's date
        ("the morning of 1 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-01T12:00"),
        # the edge of one day (not "the last 6 hours" before as_of)
        ("over the first 6 hours of 1 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-01T06:00"),
        ("in the last 30 minutes of 1 June 2022", AS_OF, "2022-06-01T23:30", "2022-06-02T00:00"),
        ("the first two hours of 2 June 2022", AS_OF, "2022-06-02T00:00", "2022-06-02T02:00"),
        ("first week of June 2022", AS_OF, "2022-06-01T00:00", "2022-06-08T00:00"),
        # blind8 U50: days at the edge of a month
        ("for the first five days of june", AS_OF, "2022-06-01T00:00", "2022-06-06T00:00"),
        ("over the last 3 days of May 2022", AS_OF, "2022-05-29T00:00", "2022-06-01T00:00"),
        ("over 1–10 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-11T00:00"),
        ("last 10 hours", AS_OF, "2022-06-15T02:30", "2022-06-15T12:30"),
        # Wednesday 15 June → the ISO week Monday 6 June .. Monday 13 June
        ("during the previous week", AS_OF, "2022-06-06T00:00", "2022-06-13T00:00"),
        ("during the previous week", t("2022-06-13T00:00"), "2022-06-06T00:00", "2022-06-13T00:00"),
        # 1 September 2022 is still ahead in June 2022: the one before
        ("the first day of September", AS_OF, "2021-09-01T00:00", "2021-09-02T00:00"),
        # days ahead, not months: this year's (refused or cut later), never a year-old day
        # (blind9 V105 answered 18 June 2021, V27 ended its window in 2021)
        ("on 18 june", AS_OF, "2022-06-18T00:00", "2022-06-19T00:00"),
        ("from june 14 through june 16", AS_OF, "2022-06-14T00:00", "2022-06-17T00:00"),
        (
            "the first day of September",
            t("2022-09-20T00:00"),
            "2022-09-01T00:00",
            "2022-09-02T00:00",
        ),
        (
            "the first day of September",
            t("2022-09-01T00:00"),
            "2022-09-01T00:00",
            "2022-09-02T00:00",
        ),
        (
            "2022-06-01 08:00:00 to 2022-06-01 09:30:00",
            AS_OF,
            "2022-06-01T08:00",
            "2022-06-01T09:30",
        ),
        (
            "from 2022-06-01T08:00Z to 2022-06-01T09:00Z",
            AS_OF,
            "2022-06-01T08:00",
            "2022-06-01T09:00",
        ),
        ("yesterday", AS_OF, "2022-06-14T00:00", "2022-06-15T00:00"),
        ("today", AS_OF, "2022-06-15T00:00", "2022-06-16T00:00"),
        ("last 24 hours", AS_OF, "2022-06-14T12:30", "2022-06-15T12:30"),
        ("past 3 days", AS_OF, "2022-06-12T12:30", "2022-06-15T12:30"),
        ("in May 2022", AS_OF, "2022-05-01T00:00", "2022-06-01T00:00"),
        ("on June 1st, 2022", AS_OF, "2022-06-01T00:00", "2022-06-02T00:00"),
        ("on 13/6/2022", AS_OF, "2022-06-13T00:00", "2022-06-14T00:00"),  # only day-first is valid
        ("on 6/6/2022", AS_OF, "2022-06-06T00:00", "2022-06-07T00:00"),  # both readings agree
        ("on 1.6.2022", AS_OF, "2022-06-01T00:00", "2022-06-02T00:00"),  # dots: European
        ("on 1 June 2022 08:00-15:00", AS_OF, "2022-06-01T08:00", "2022-06-01T15:00"),
        ("on 1 June 2022 08:00—15:00", AS_OF, "2022-06-01T08:00", "2022-06-01T15:00"),  # em dash
        ("1 June 2022 from 8am to 3pm", AS_OF, "2022-06-01T08:00", "2022-06-01T15:00"),
        ("1 June 2022 from 12am to 12pm", AS_OF, "2022-06-01T00:00", "2022-06-01T12:00"),
        ("08:00 to 15:00 on 1 June 2022", AS_OF, "2022-06-01T08:00", "2022-06-01T15:00"),
        ("on 1 June 2022 in the afternoon", AS_OF, "2022-06-01T12:00", "2022-06-01T18:00"),
        ("the evening of 1 June 2022", AS_OF, "2022-06-01T18:00", "2022-06-02T00:00"),
        ("the night of 1 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-01T06:00"),
        ("last week of June 2022", AS_OF, "2022-06-24T00:00", "2022-07-01T00:00"),
        ("second week of June 2022", AS_OF, "2022-06-08T00:00", "2022-06-15T00:00"),
        ("the last day of February 2024", AS_OF, "2024-02-29T00:00", "2024-03-01T00:00"),
        ("from 1 June to 3 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-04T00:00"),
        ("between 1 and 3 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-04T00:00"),
        ("June 1-3, 2022", AS_OF, "2022-06-01T00:00", "2022-06-04T00:00"),
        (
            "from 1 June 2022 22:00 to 2 June 2022 02:00",
            AS_OF,
            "2022-06-01T22:00",
            "2022-06-02T02:00",
        ),
        ("from May to June 2022", AS_OF, "2022-05-01T00:00", "2022-07-01T00:00"),
        ("from 2022-06-01 to 2022-06-03", AS_OF, "2022-06-01T00:00", "2022-06-04T00:00"),
        ("between 1 June 2022 and 3 June 2022", AS_OF, "2022-06-01T00:00", "2022-06-04T00:00"),
        ("1 June 2022 22:00 - 2 June 2022 01:30", AS_OF, "2022-06-01T22:00", "2022-06-02T01:30"),
        ("since 10 June 2022", AS_OF, "2022-06-10T00:00", "2022-06-15T12:30"),
        ("in 2021", AS_OF, "2021-01-01T00:00", "2022-01-01T00:00"),
        ("last month", AS_OF, "2022-05-01T00:00", "2022-06-01T00:00"),
        ("this month", AS_OF, "2022-06-01T00:00", "2022-07-01T00:00"),
        ("past week", AS_OF, "2022-06-08T12:30", "2022-06-15T12:30"),
        ("the last two hours", AS_OF, "2022-06-15T10:30", "2022-06-15T12:30"),
        ("the past 2 months", AS_OF, "2022-04-15T12:30", "2022-06-15T12:30"),
        ("1 June 2022 until 23:59:59", AS_OF, "2022-06-01T00:00", "2022-06-02T00:00"),
        ("on 1 June 2022 from 10:00 to midnight", AS_OF, "2022-06-01T10:00", "2022-06-02T00:00"),
        ("on 1 June 2022 from 10:00 to 10:59", AS_OF, "2022-06-01T10:00", "2022-06-01T11:00"),
    ],
)
def test_phrases(phrase: str, as_of: datetime, start: str, end: str) -> None:
    result = parse_time(phrase, as_of=as_of)
    assert result.status == "ok", result.message
    assert spans_of(result) == [(t(start), t(end))]


def test_explicit_zones_are_converted_to_utc() -> None:
    iso = parse_time("from 2022-06-01T08:00:00+02:00 to 2022-06-01T10:00:00+02:00", as_of=AS_OF)
    assert spans_of(iso) == [(t("2022-06-01T06:00"), t("2022-06-01T08:00"))]
    named = parse_time("on 1 June 2022 from 08:00 to 09:00 CEST", as_of=AS_OF)
    assert spans_of(named) == [(t("2022-06-01T06:00"), t("2022-06-01T07:00"))]
    spaced = parse_time("2022-06-01 08:00:00+01:00 to 2022-06-01 09:00:00+01:00", as_of=AS_OF)
    assert spans_of(spaced) == [(t("2022-06-01T07:00"), t("2022-06-01T08:00"))]
    # a hyphen between two clocks is a range, never an offset of -09:00
    ranged = parse_time("on 1 June 2022 08:00:00-09:00:00", as_of=AS_OF)
    assert spans_of(ranged) == [(t("2022-06-01T08:00"), t("2022-06-01T09:00"))]


def test_as_of_without_zone_is_utc_and_other_zones_are_converted() -> None:
    naive = parse_time("last 10 hours", as_of=datetime(2022, 6, 15, 12, 30))
    rome = parse_time(
        "last 10 hours", as_of=datetime(2022, 6, 15, 14, 30, tzinfo=timezone(timedelta(hours=2)))
    )
    assert spans_of(naive) == spans_of(rome) == [(t("2022-06-15T02:30"), t("2022-06-15T12:30"))]


def test_yearless_date_borrows_the_year_written_nearby() -> None:
    result = parse_time("compare 1 May with 1 June 2021", as_of=AS_OF)
    assert spans_of(result) == [
        (t("2021-05-01T00:00"), t("2021-05-02T00:00")),
        (t("2021-06-01T00:00"), t("2021-06-02T00:00")),
    ]


def test_several_clock_ranges_share_one_date() -> None:
    result = parse_time("on 1 June 2022 between 08:00–09:00 and 15:00–16:00", as_of=AS_OF)
    assert spans_of(result) == [
        (t("2022-06-01T08:00"), t("2022-06-01T09:00")),
        (t("2022-06-01T15:00"), t("2022-06-01T16:00")),
    ]


@pytest.mark.parametrize(
    ("phrase", "unit", "expected"),
    [
        ("in June 2022 and the same period of the previous month", "month",
         ("2022-05-01T00:00", "2022-06-01T00:00")),
        ("on 31 March 2022 and the same period of the previous month", "month",
         ("2022-02-28T00:00", "2022-03-01T00:00")),
        # not a whole month: the start moves a month (clamped) and the length is kept
        ("on 30 March 2022 and the same period of the previous month", "month",
         ("2022-02-28T00:00", "2022-03-01T00:00")),
        ("on 1 June 2022 and the same period of the previous year", "year",
         ("2021-06-01T00:00", "2021-06-02T00:00")),
        ("on 1 June 2022 08:00-09:00 and the same period of the previous week", "week",
         ("2022-05-25T08:00", "2022-05-25T09:00")),
        ("on 1 June 2022 and the same period a day earlier", "day",
         ("2022-05-31T00:00", "2022-06-01T00:00")),
    ],
)  # fmt: skip
def test_same_period_shifts(phrase: str, unit: str, expected: tuple[str, str]) -> None:
    result = parse_time(phrase, as_of=AS_OF)
    assert result.status == "ok", result.message
    assert len(result.windows) == 2, unit
    assert (result.windows[1].start, result.windows[1].end) == (t(expected[0]), t(expected[1]))


def test_day_first_european_date_is_ambiguous_with_two_candidates() -> None:
    result = parse_time("power of node 900 on 1/6/2022 from 08:00 to 09:00", as_of=AS_OF)
    assert result.status == "ambiguous"
    assert result.windows == ()
    assert [(w.start, w.end) for w in result.candidates] == [
        (t("2022-06-01T08:00"), t("2022-06-01T09:00")),  # day-first first
        (t("2022-01-06T08:00"), t("2022-01-06T09:00")),
    ]
    assert result.message is not None
    assert "1/6/2022" in result.message


def test_clock_range_over_several_days_is_ambiguous() -> None:
    result = parse_time("over 1–10 June 2022 between 08:00 and 09:00", as_of=AS_OF)
    assert result.status == "ambiguous"
    assert [(w.start, w.end) for w in result.candidates] == [
        (t("2022-06-01T08:00"), t("2022-06-10T09:00")),
        (t("2022-06-01T00:00"), t("2022-06-11T00:00")),
    ]


@pytest.mark.parametrize(
    "question",
    [
        "How many nodes are there in M100?",
        "Plot the power of node 900 and create a histogram.",
        "Compare GPU 0 and GPU 3 of node 12.",
        "top-10 users by number of jobs",
        "The query may fail for node 3.",  # "may" the verb is no month
    ],
)
def test_no_window_is_missing(question: str) -> None:
    result = parse_time(question, as_of=AS_OF)
    assert result.status == "missing"
    assert result.windows == () and result.candidates == ()
    assert result.message


@pytest.mark.parametrize(
    ("phrase", "named"),
    [
        ("power on the 45th of Smarch", "45th of Smarch"),
        ("power on 45 Smarch 2022", "45 Smarch 2022"),
        ("power on 31 June 2022", "31 June 2022"),
        ("power on 30 February 2022", "30 February 2022"),
        ("on 1 June 2022 at 25:00", "25:00"),
        ("on 1 June 2022 from 08:75 to 09:00", "08:75"),
        ("on 2022-13-01", "2022-13-01"),
        ("on 45/13/2022", "45/13/2022"),
        ("on 1 June 2022 from 15:00 to 08:00", "from 15:00 to 08:00"),  # end before start
        ("from 3 June 2022 to 1 June 2022", "3 June 2022 to 1 June 2022"),
        ("the same period of the previous month", "same period"),  # of nothing
        ("the last 0 hours", "last 0 hours"),
        ("the first 25 hours of 1 June 2022", "first 25 hours of"),  # more than the day
    ],
)
def test_unparseable_names_the_phrase(phrase: str, named: str) -> None:
    result = parse_time(phrase, as_of=AS_OF)
    assert result.status == "unparseable"
    assert result.windows == ()
    assert result.message is not None
    assert named in result.message


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("node 900 on 1 June 2022 from 08:00 to 09:00", ["on 1 June 2022", "from 08:00", "09:00"]),
        ("GPU-0–4 for the last 10 hours", ["for the last 10 hours"]),
        ("nodes 10-19 and jobs 3423336, 4835969", []),
        ("top-3 jobs over the 10 days", []),
    ],
)
def test_time_spans_cover_dates_and_nothing_else(text: str, phrases: list[str]) -> None:
    assert [text[a:b] for a, b in time_spans(text)] == phrases


# --- properties ---------------------------------------------------------------------------------

FRAGMENTS = [
    "node 900", "on 1 June 2022", "from 08:00 to 15:00", "between 08:00–09:00", "(full day)",
    "the morning of 1 June 2022", "first week of June 2022",
    "the same period of the previous month", "over 1–10 June 2022", "last 10 hours",
    "during the previous week", "the first day of September",
    "2022-06-01 08:00:00", "yesterday", "today", "past 3 days", "in May 2022", "on June 1st, 2022",
    "1/6/2022", "8am to 3pm", "on the 45th of Smarch", "until 23:59", "since 1 May 2022", "daily",
    "jobs 3423336, 4835969", "and", "to", "-", "at noon", "GPU-0–4", "in 2021", "this week",
]  # fmt: skip
AS_OFS = [
    AS_OF,
    datetime(2022, 1, 1, tzinfo=UTC),
    datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
    datetime(2020, 3, 9, 6, 0, tzinfo=timezone(timedelta(hours=-5))),
]


def test_random_sentences_never_raise_and_keep_the_invariants() -> None:
    rng = random.Random(20220601)
    statuses = set()
    for _ in range(600):
        text = " ".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 5)))
        result = parse_time(text, as_of=rng.choice(AS_OFS))
        statuses.add(result.status)
        assert (result.status == "ok") == bool(result.windows) or result.status == "ambiguous"
        for w in result.windows + result.candidates:
            assert w.start < w.end, text
            assert w.start.utcoffset() == timedelta(0) and w.end.utcoffset() == timedelta(0)
            assert w.start.tzinfo is UTC and w.end.tzinfo is UTC
        for a, b in result.spans:
            assert 0 <= a < b <= len(text)
        assert result == TimeParse.from_dict(result.to_dict())
    assert statuses == {"ok", "missing", "ambiguous", "unparseable"}


@pytest.mark.parametrize("phrase", [p for p in FRAGMENTS if p not in ("and", "to", "-")])
@pytest.mark.parametrize("as_of", AS_OFS)
def test_every_fragment_is_deterministic(phrase: str, as_of: datetime) -> None:
    assert parse_time(phrase, as_of=as_of) == parse_time(phrase, as_of=as_of)


# --- the result types ---------------------------------------------------------------------------


def test_round_trip_through_json_shape() -> None:
    result = parse_time(APPENDIX_A[10][1], as_of=AS_OF)
    data = result.to_dict()
    assert data["status"] == "ok"
    assert data["windows"] == [
        {"start": "2022-06-01T00:00:00+00:00", "end": "2022-06-08T00:00:00+00:00",
         "text": "for the first week of June 2022", "granularity_hint": "day"},
        {"start": "2022-05-01T00:00:00+00:00", "end": "2022-05-08T00:00:00+00:00",
         "text": "the same period of the previous month", "granularity_hint": "day"},
    ]  # fmt: skip
    assert TimeParse.from_dict(data) == result


def test_from_dict_accepts_a_model_answer_and_normalises_to_utc() -> None:
    model = {
        "status": "ok",
        "windows": [{"start": "2022-06-01T10:00:00+02:00", "end": "2022-06-01T11:00Z"}],
    }
    parsed = TimeParse.from_dict(model)
    assert spans_of(parsed) == [(t("2022-06-01T08:00"), t("2022-06-01T11:00"))]
    assert parsed.windows[0].start.tzinfo is UTC


@pytest.mark.parametrize(
    "bad",
    [
        {"status": "ok", "windows": [{"start": "1 June", "end": "2022-06-01T11:00Z"}]},
        {"status": "ok", "windows": [{"start": "2022-06-01T11:00Z", "end": "2022-06-01T10:00Z"}]},
        {"status": "ok", "windows": []},
        {"status": "maybe", "windows": []},
        {"status": "missing"},  # a non-ok status needs a message
        {"status": "ok", "windows": [{"start": "2022-06-01T10:00Z", "end": "2022-06-01T11:00Z",
                                      "granularity_hint": "fortnight"}]},
        {"status": "ok", "windows": "2022-06-01"},
    ],
)  # fmt: skip
def test_from_dict_rejects_invalid_model_answers(bad: dict[str, object]) -> None:
    with pytest.raises(UsageError) as info:
        TimeParse.from_dict(bad)
    assert info.value.hint


def test_window_rejects_naive_and_empty() -> None:
    with pytest.raises(UsageError):
        ParsedWindow(datetime(2022, 6, 1), datetime(2022, 6, 2))
    with pytest.raises(UsageError):
        ParsedWindow(t("2022-06-01T00:00"), t("2022-06-01T00:00"))


@pytest.mark.parametrize(
    ("phrase", "moment"),
    [
        ("at 08:00 on 1 June 2022", "2022-06-01T08:00:00+00:00"),
        ("4pm on june 1 2022", "2022-06-01T16:00:00+00:00"),
        ("at noon on 1 June 2022", "2022-06-01T12:00:00+00:00"),
        ("on 1 June 2022 at 10:30", "2022-06-01T10:30:00+00:00"),
    ],
)
def test_one_instant_is_a_one_second_window_marked_instant(phrase: str, moment: str) -> None:
    result = parse_time(phrase, as_of=AS_OF)
    assert result.status == "ok", result.message
    (window,) = result.windows
    assert window.instant
    assert window.start.isoformat() == moment
    assert (window.end - window.start).total_seconds() == 1
    assert ParsedWindow.from_dict(window.to_dict()) == window


def test_a_window_is_not_an_instant() -> None:
    (window,) = parse_time("on 1 June 2022 from 08:00 to 09:00", as_of=AS_OF).windows
    assert not window.instant and "instant" not in window.to_dict()


@pytest.mark.parametrize(
    ("phrase", "as_of", "window"),
    [
        ("between 8 and 9 on 1 June 2022", AS_OF, ("06-01 08:00", "06-01 09:00")),
        ("between 2 and 4pm on june 1 2022", AS_OF, ("06-01 14:00", "06-01 16:00")),
        ("9 to 10 am on 1 june 2022", AS_OF, ("06-01 09:00", "06-01 10:00")),
        ("from 10 to 11am june 1 2022", AS_OF, ("06-01 10:00", "06-01 11:00")),
        ("on 1 June 2022 6-7am", AS_OF, ("06-01 06:00", "06-01 07:00")),
        ("on 1 June 2022, 10pm to 6am", AS_OF, ("06-01 22:00", "06-02 06:00")),
        # the operators' phrasings that used to widen or shift the window
        ("this morning between 7 and 8", datetime(2022, 6, 1, 12, tzinfo=UTC),
         ("06-01 07:00", "06-01 08:00")),
        ("yesterday afternoon", datetime(2022, 6, 2, 8, tzinfo=UTC),
         ("06-01 12:00", "06-01 18:00")),
        ("this afternoon between 2 and 4", datetime(2022, 6, 1, 20, tzinfo=UTC),
         ("06-01 14:00", "06-01 16:00")),
    ],
)  # fmt: skip
def test_bare_hours_and_parts_of_the_day(
    phrase: str, as_of: datetime, window: tuple[str, str]
) -> None:
    result = parse_time(phrase, as_of=as_of)
    assert result.status == "ok", result.message
    assert [(w.start.strftime("%m-%d %H:%M"), w.end.strftime("%m-%d %H:%M"))
            for w in result.windows] == [window]  # fmt: skip


@pytest.mark.parametrize("text", ["nodes 10-14 on 1 June 2022", "jobs 3 to 5 on 1 June 2022"])
def test_bare_number_ranges_are_not_hours(text: str) -> None:
    (window,) = parse_time(text, as_of=AS_OF).windows
    assert (window.start.hour, window.end - window.start) == (0, timedelta(days=1))


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        # the strict bracketed form of some tools
        ("total_power for node 900 from [2022-06-01 10:00:00] to [2022-06-01 10:30:00]",
         "2022-06-01T10:00", "2022-06-01T10:30"),
        # a bare pair of hours right after a date is that day's hours, not days of the month
        ("average input power of PSU 0 on node 18, 1 June 10-11", "2022-06-01T10:00",
         "2022-06-01T11:00"),
        ("gpu utilisation on 1st June 2022, 15-16", "2022-06-01T15:00", "2022-06-01T16:00"),
        ("june 1 10-11 power", "2022-06-01T10:00", "2022-06-01T11:00"),
        ("power on June 10-11", "2022-06-10T00:00", "2022-06-12T00:00"),  # still days
    ],
)  # fmt: skip
def test_brackets_and_hours_after_a_date(text: str, start: str, end: str) -> None:
    got = parse_time(text, as_of=t("2022-06-15T00:00"))
    assert got.status == "ok", got.message
    assert [(w.start, w.end) for w in got.windows] == [(t(start), t(end))]
    assert not any(w.instant for w in got.windows)


def test_hours_after_a_date_must_ascend() -> None:
    got = parse_time("nodes of rack 3 on 1 June 12-4", as_of=t("2022-06-15T00:00"))
    assert got.windows[0].end - got.windows[0].start == timedelta(days=1)  # '12-4' not read


def test_two_ranges_of_hours_share_the_one_day_said() -> None:
    # '08:00-12:00 vs 14:00-18:00 on jun 1' put the first range on the reference day; '8-12 vs
    # 14-18 on jun 1' read the first range as no time at all
    for text in (
        "cluster cpu util 08:00-12:00 vs 14:00-18:00 on jun 1",
        "cluster cpu util 8-12 vs 14-18 on jun 1",
        "power 8-12h and 14-18h on 1 june",
    ):
        found = parse_time(text, as_of=AS_OF)
        assert [(w.start.hour, w.end.hour, w.start.day) for w in found.windows] == [
            (8, 12, 1),
            (14, 18, 1),
        ], text
    # a list of node ids before a dated range stays ids
    nodes = parse_time("power of nodes 8-12 vs 14-18 on jun 1", as_of=AS_OF)
    assert [(w.start.hour, w.end.hour) for w in nodes.windows] == [(14, 18)]
    # two days said: each range keeps its own
    two = parse_time("08:00-09:00 on jun 1 vs 08:00-09:00 on jun 2", as_of=AS_OF)
    assert [w.start.day for w in two.windows] == [1, 2]


def test_a_second_period_borrows_the_month_of_the_first() -> None:
    # 'or the second (8-14)' and 'vs 8-14' were no time: one window, the other words a metric
    cases = {
        "wind the first week of june (1-7) or the second (8-14)?": [(1, 8), (8, 15)],
        "wind in june 1-7 vs 8-14": [(1, 8), (8, 15)],
        "wind the first week of june or the second week": [(1, 8), (8, 15)],
        "first week of june or the last": [(1, 8), (24, 1)],
    }
    for text, days in cases.items():
        found = parse_time(text, as_of=AS_OF)
        assert [(w.start.day, w.end.day) for w in found.windows] == days, text
    # nothing to borrow from: no window
    assert parse_time("nodes with power over 300 or the second", as_of=AS_OF).windows == ()


def test_ids_joined_by_and_stay_ids_before_a_date() -> None:
    # 'nodes 3-5 and 8-9 on june 1' read 8-9 as that day's hours
    found = parse_time("nodes 3-5 and 8-9 on june 1", as_of=AS_OF)
    assert [(w.start.hour, w.end - w.start) for w in found.windows] == [(0, timedelta(days=1))]


def test_an_hour_in_words_after_and_ends_a_between_range() -> None:
    # 'between quarter to ten and ten' was the instant 09:45 (the range end unread), and
    # 'between ten and eleven on june 5' the whole day
    cases = {
        "jobs that got going between quarter to ten and ten on june 5": ((9, 45), (10, 0)),
        "between 9:45 and ten on june 5": ((9, 45), (10, 0)),
        "between ten and eleven on june 5": ((10, 0), (11, 0)),
        "between two and four pm on june 5": ((14, 0), (16, 0)),
    }
    for text, ((h0, m0), (h1, m1)) in cases.items():
        (w,) = parse_time(text, as_of=AS_OF).windows
        assert (w.start.hour, w.start.minute, w.end.hour, w.end.minute) == (h0, m0, h1, m1), text
    # ids joined by 'and' are no hours
    (day,) = parse_time("power of node 3 and ten others on june 5", as_of=AS_OF).windows
    assert day.end - day.start == timedelta(days=1)


def test_a_weeks_days_said_in_words_are_read_with_it() -> None:
    (w,) = parse_time(
        "median humidity over the first week of june (1st to 7th)", as_of=AS_OF
    ).windows
    assert (w.start.day, w.end.day) == (1, 8)


def test_a_clock_right_before_its_date_is_that_days_time() -> None:
    # '10pm jun 5 to 2am jun 6' read three windows: 22:00-24:00, the instant 'jun 5 2am', jun 6
    (w,) = parse_time("humidity from 10pm jun 5 to 2am jun 6", as_of=AS_OF).windows
    assert (w.start.day, w.start.hour, w.end.day, w.end.hour) == (5, 22, 6, 2)


def test_a_half_hour_said_the_british_way_ends_a_range() -> None:
    # 'between 10 and half 11', 'from 5 till half 5': the numbers were left unread
    (a,) = parse_time(
        "lowest cpu idle node 301 between 10 and half 11 on june 1", as_of=AS_OF
    ).windows
    assert (a.start.hour, a.end.hour, a.end.minute) == (10, 11, 30)
    (b,) = parse_time("ICT power from 5 till half 5 in the morning, jun 1", as_of=AS_OF).windows
    assert (b.start.hour, b.end.hour, b.end.minute) == (5, 5, 30)


def test_minutes_to_an_hour_that_would_be_a_backward_range_are_a_clock() -> None:
    # blind14 Z02 'ten to eight in the morning' was the whole morning, 00:00-12:00
    cases = {
        "PUE reading, ten to eight in the morning on June 1st 2022": (7, 50),
        "node 5 power at twenty to three pm on june 1": (14, 40),
        "node 5 power at five to four on june 1": (3, 55),
    }
    for text, (h, m) in cases.items():
        (w,) = parse_time(text, as_of=AS_OF).windows
        assert (w.start.hour, w.start.minute, w.end - w.start) == (h, m, timedelta(seconds=1)), text
    # forward, it is a range of hours, or nothing this rule reads
    (w,) = parse_time("node 5 power from 10 to 12 on june 1", as_of=AS_OF).windows
    assert (w.start.hour, w.end.hour) == (10, 12)


def test_hours_said_beside_a_part_of_the_day_belong_to_that_part_only() -> None:
    # analysis5 V23: the afternoon moved overnight's '(0-6)' to 12-18 too, and the overnight
    # window was lost (the comparison answered with the afternoon alone)
    for text in ("PUE overnight (0-6) vs the afternoon (12-18) on 1 June 2022",
                 "PUE overnight (0-6) vs the afternoon on 1 June 2022"):  # fmt: skip
        found = parse_time(text, as_of=AS_OF)
        assert [(w.start.hour, w.end.hour) for w in found.windows] == [(0, 6), (12, 18)], text


def test_two_parts_of_the_day_side_by_side_share_the_hours_said() -> None:
    # blind10 W15: 'first thing' took '6 to 7' and 'this morning' was left a window of its own
    # (two answers, the whole morning's beside 06:00-07:00's)
    found = parse_time("mean cpu idle across rack 15 first thing this morning, 6 to 7",
                       as_of=datetime(2022, 6, 1, 10, tzinfo=UTC))  # fmt: skip
    assert [(w.start.hour, w.end.hour) for w in found.windows] == [(6, 7)]


def test_a_night_from_one_day_into_the_next_is_one_window() -> None:
    # blind13 Y16: 'overnight jun 5 into jun 6, from 10pm to 2am' was 00:00-06:00 on 5 June and
    # 22:00-02:00 from 6 June (two windows, neither the night asked)
    for text in ("overnight jun 5 into jun 6, from 10pm to 2am, the coldest it got outside",
                 "inlet temp jun 5 into jun 6 from 22:00 to 02:00"):  # fmt: skip
        found = parse_time(text, as_of=datetime(2022, 7, 5, 9, tzinfo=UTC))
        assert [(w.start, w.end) for w in found.windows] == [
            (datetime(2022, 6, 5, 22, tzinfo=UTC), datetime(2022, 6, 6, 2, tzinfo=UTC))
        ], text
    # one day said: a 24-hour range that ends before it starts is still refused, not guessed
    assert parse_time("jun 6 from 22:00 to 02:00", as_of=AS_OF).status == "unparseable"
