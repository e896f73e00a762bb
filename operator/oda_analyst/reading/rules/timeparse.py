"""Deterministic time-window parser for Stage 1 (input validation) of the retriever.

``parse_time(text, as_of=...)`` turns the temporal phrases of a question into half-open UTC
windows ``[start, end)``. A model-backed extractor may run first; this parser always runs and its
``TimeParse`` is the type a model's JSON is validated into (``TimeParse.from_dict``).

Semantics (settled here, relied upon by the rest of the retriever):

- **Zone.** Every time is UTC (the M100 lake is UTC) unless the text carries an offset or a zone
  (``2022-06-01T08:00+02:00``, ``08:00 CEST``); results are always aware UTC datetimes.
- **Days.** ``on 1 June 2022`` and ``(full day)`` are ``[00:00, next day 00:00)``; ``over 1–10 June
  2022`` counts both days: ``[1 June, 11 June)``; ``in May 2022`` is the calendar month.
- **Clock ranges.** ``08:00–09:00``, ``from 08:00 to 15:00``, ``8am to 3pm`` take their date from
  a date elsewhere in the sentence (the nearest one before them, else after them), else from
  ``as_of``'s date. An end is exclusive (``08:00–09:00`` is one hour), except that an end written
  as ``HH:59`` (or ``HH:MM:59``) names the last minute (second) the operator wants, so it is read
  inclusively: ``20:00 to 23:59`` is ``[20:00, 24:00)``. ``midnight`` as an end is 24:00.
  ``half past eight``, ``quarter to 9 pm``, ``3 o'clock`` are instants (08:30, 20:45, 03:00).
- **Parts of the day.** ``the first/last N hours (minutes) of <day>`` → from midnight / up to the
  next midnight; morning 00:00–12:00 (the ante-meridiem half: accounting questions such as
  "CPU hours consumed in the morning" then partition the day with no silent gap, which 06:00–12:00
  would leave), afternoon 12:00–18:00, evening 18:00–24:00, night 00:00–06:00.
- **Weeks.** ``first week of June 2022`` is days 1–7 → ``[1 June, 8 June)``; second 8–14, third
  15–21, fourth 22–28, fifth 29–end, last = the month's last seven days. ``the first five days
  of June`` is days 1–5, ``the last 3 days of May`` the month's last three.
- **Relative** (to ``as_of``). ``last/past N hours|days|weeks`` → ``[as_of − N, as_of)`` (months
  and years by calendar); ``yesterday``, ``today`` and ``this week|month|year`` are whole calendar
  units; ``last/previous week`` (and ``during the previous week``) is the previous ISO week,
  Monday to Monday, while ``past week`` is the rolling seven days; ``last/previous month`` is the
  previous calendar month. ``since X`` ends at ``as_of``.
- **Dates without a year** take the year of the nearest date in the text that has one, else the
  latest year in which they do not start after ``as_of`` (``the first day of September`` asked in
  June 2022 means 1 September 2021).
- **Same period.** ``the same period of the previous month`` is the window before it moved one
  calendar month back (a whole month stays a whole month; otherwise the start moves and the length
  is kept: first week of June 2022 → ``[1 May, 8 May)``); likewise day, week and year.
- **Outcomes.** No temporal phrase → ``missing`` (the caller knows whether a window is mandatory;
  for job questions it is the jobs' own duration). ``1/6/2022`` with both readings valid and
  different → ``ambiguous`` with both candidates (day-first first). An invalid date or clock, a
  window that ends before it starts, a lone instant, or a clock range over several days →
  ``unparseable``/``ambiguous`` with a message naming the phrase.
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone
from typing import cast

from oda_analyst.reading.rules.lexicon_data import day_part_pattern, load_day_parts
from oda_analyst.reading.types import ParsedWindow, TimeParse

# --- lexing -------------------------------------------------------------------------------------

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MON = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?(?![a-z])"
)
_ORD_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "last": -1,
}  # fmt: skip
_NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30,
    "twenty-four": 24, "twenty four": 24, "forty-eight": 48, "forty eight": 48,
}  # fmt: skip
_NUM = (
    r"(?:\d+|twenty[- ]four|forty[- ]eight|an?|one|two|three|four|five|six|seven|eight|nine"
    r"|ten|eleven|twelve|twenty|thirty)"
)
_ORD = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last"
    r"|\d{1,2}(?:st|nd|rd|th))"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS = "|".join(_WEEKDAY_NAMES)
_WEEKDAY_ABBR = r"mon|tues?|wed|thu(?:rs?)?|fri|sat|sun"
_YEAR = r"(?:,?\s+(?P<y>\d{4})(?!\d))?"
# '(1-7)' after a week: the days it means, said again
_SAID_DAYS = (
    r"(?:\s*\(\s*(?:the\s+)?(?P<pd0>\d{1,2})(?:st|nd|rd|th)?\s*(?:[-–]|to|till|through"
    r"|thru)\s*(?:the\s+)?(?P<pd1>\d{1,2})(?:st|nd|rd|th)?\s*\))?"
)
# after 'or', 'vs', 'and', 'than' beside a week or a day range of a month said before
_AFTER_PAIRING = (
    r"(?:(?<=\bor\s)|(?<=\bvs\s)|(?<=\bvs\.\s)|(?<=\bversus\s)|(?<=\band\s)|(?<=\bthan\s))"
)
_LEAD = (
    r"(?<![a-z])(?:(?P<lead>from|between|since|after|until|till|before|on|in|over|during|for|at|by|within"
    r"|throughout|across|starting(?:\s+(?:at|from|on))?|up\s+to)\s+)?(?:the\s+)?"
)
_CLOCK = (
    r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.\d+)?)?(?:\s*(?P<ap>[ap]\.?m\.?(?![a-z])))?"
    r"|(?P<h2>\d{1,2})\s*(?P<ap2>[ap]\.?m\.?(?![a-z]))|(?P<named>noon|midday|midnight))"
)
# A numeric offset only after seconds, so that "08:00-09:00" stays a range, not 08:00 at -09:00.
_ZONE = (
    r"(?:(?P<tz>Z(?![a-z])|(?<=\d:\d\d:\d\d)[+-]\d{2}:?\d{2}(?![:\d-]))"
    r"|\s*(?P<tzn>UTC|GMT|CEST|CET)\b)?"
)
_ZONE_ISO = r"(?:(?P<tz>Z(?![a-z])|[+-]\d{2}:?\d{2}(?![:\d-]))|\s*(?P<tzn>UTC|GMT|CEST|CET)\b)?"
_UNIT = r"(?P<unit>minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|years?)(?![a-z])"

_MINUTES = {"five": 5, "ten": 10, "twenty": 20, "twenty-five": 25, "twenty five": 25}
_MINUTE_WORDS = r"twenty[- ]five|five|ten|twenty|\d{1,2}"
# 'between 10 and 11 jun 1', '11 june 1st': a day number right after the month is the date, so
# the number before it is no day (it is an hour)
_HOUR_WORD = r"(?:\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_DAY_FOLLOWS = r"(?!\s+\d{1,2}(?:st|nd|rd|th)?(?![\d\-–]|[:.]\d|\s*[ap]\.?m))"

_PATTERNS: tuple[tuple[str, str], ...] = (
    ("isodt", r"(?<![\d-])(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})T" + _CLOCK + _ZONE_ISO),
    ("shift", r"same\s+(?:period|time|window|interval|range|span|dates?|days?|hours?)\s+"
              r"(?:of|in|during|from|for)\s+(?:the\s+)?(?:previous|prior|preceding|last|past)\s+"
              r"(?P<unit>day|week|month|year)\b"),
    ("shift", r"same\s+(?:period|time|window|interval|range|span|dates?|days?)\s+(?:a|one)\s+"
              r"(?P<unit>day|week|month|year)\s+(?:earlier|before|ago)\b"),
    ("week", r"(?P<o>first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)\s+week\s+of\s+"
             r"(?:the\s+month\s+of\s+)?(?P<mon>" + _MON + ")" + _YEAR + _SAID_DAYS),
    # 'the first fortnight of june (1st-14th)': days 1-14; the second, 15 to the month's end
    ("fortnight", r"(?P<o>first|second|last|1st|2nd)\s+fortnight\s+of\s+"
                  r"(?:the\s+month\s+of\s+)?(?P<mon>" + _MON + ")" + _YEAR + _SAID_DAYS),
    ("ordday", r"(?P<o>" + _ORD + r")\s+day\s+of\s+(?:the\s+month\s+of\s+)?(?P<mon>" + _MON + ")"
               + _YEAR),
    # 'the first five days of june', 'the last 3 days of May 2022'
    ("edgedays", r"(?P<edge>first|last|final)\s+(?P<n>" + _NUM + r")\s+days\s+of\s+"
                 r"(?:the\s+month\s+of\s+)?(?P<mon>" + _MON + ")" + _YEAR),
    # "the first 6 hours of 1 June": a part of the day named, before "last N hours" (relative)
    ("edge", r"(?P<edge>first|last|final)\s+(?P<n>" + _NUM + r"|half)\s*"
             r"(?P<unit>hours?|hrs?|h|minutes?|mins?)\s+of\b"),
    ("reln", r"(?P<which>last|past|previous|preceding|prior)\s+(?P<n>" + _NUM + r")\s*" + _UNIT),
    ("rel", r"(?P<which>last|past|previous|preceding|prior|this|current)\s+"
            r"(?P<unit>hour|day|week|month|year)\b"),
    # 'tomorrow' is read so that it is refused as a window after the reference time, never
    # left for a metric or a clarification
    ("rel", r"(?P<which>day\s+before\s+yesterday|yesterday|yday|yest|today|tomorrow"
            r"|last\s+night)\b"),
    # 'on wednesday', 'last sunday', '2pm-3pm wed': the latest such day on or before the
    # reference day ('last' skips the reference day itself); an abbreviation only where it
    # cannot be a word ('sat', 'sun'): after on/last/this/since or at the end of the question
    ("weekday", r"(?:(?P<wlast>last|this|past|previous)\s+)?(?P<wd>" + _WEEKDAYS + r")\b"),
    ("weekday", r"(?:(?<=\bon\s)|(?<=\blast\s)|(?<=\bthis\s)|(?<=\bsince\s))"
                r"(?P<wa>" + _WEEKDAY_ABBR + r")\b\.?"),
    ("weekday", r"(?P<wa>" + _WEEKDAY_ABBR + r")\.?\s*[?.!]?\s*$"),
    # 'on the 5th', 'the 1st': that day of the reference month
    ("monthday", r"(?<=\bthe\s)(?P<md>\d{1,2})(?:st|nd|rd|th)\b"
                 r"(?!\s+(?:of|week|day|hour|percentile|largest|highest|lowest|most|least)\b)"
                 # 'the 6th to the 9th of June': the first day of a range (below)
                 r"(?!\s*(?:[-–—]|to|through|thru|until|till|and)\s*(?:the\s+)?" + _DAY
                 + r"(?:\s+of)?\s+" + _MON + ")"),
    # '3-5 june', 'between 3 and 5 june', 'from the 6th to the 9th of june'
    # 'on the first', 'on the third': the ordinal word alone, only after 'on the'
    ("monthday", r"(?<=\bon\sthe\s)(?P<mw>first|second|third|fourth|fifth|sixth|seventh|eighth"
                 r"|ninth|tenth)\b(?!\s*(?:of|week|day|hour|minute|few|time|\d|node|job|rack|gpu"
                 r"|user)\w*)"),
    ("dayrange", r"(?<![\d.,/:-])(?:(?P<d0>" + _DAY + r")\s*(?:[-–—]|to|through|thru|until|till)\s*"
                 r"|(?<=between\s)(?P<b0>" + _DAY + r")\s+and\s+|(?<=between\sthe\s)(?P<b1>"
                 + _DAY + r")\s+and\s+)(?:the\s+)?(?P<d1>" + _DAY + r")(?:\s+of)?\s+"
                 r"(?P<mon>" + _MON + ")" + _YEAR
                 + _DAY_FOLLOWS),
    # 'June 10-11' (days), but not '1 June 10-11': a day already named, the range is hours
    ("dayrange", r"(?<!\d\s)(?<!\d\s\s)(?<!\d(?:st|nd|rd|th)\s)(?P<mon>" + _MON + r")\s+"
                 r"(?P<d0>" + _DAY + r")\s*(?:[-–—]|to|through|thru)\s*"
                 r"(?P<d1>" + _DAY + r")(?!\d|:\d)(?!\s*[ap]\.?m\b)" + _YEAR),
    ("isodate", r"(?<![\d-])(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?![\d-])"),
    ("numdate", r"(?<![\d/.])(?P<a>\d{1,2})(?P<sep>[/.])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4})(?!\d)"),
    ("dmy", r"(?<![\d.,/:-])(?P<d>" + _DAY + r")(?:\s+of)?\s+(?P<mon>" + _MON + ")" + _YEAR
            + _DAY_FOLLOWS),
    # 'jun1', typed without the space
    ("mdy", r"(?P<mon>" + _MON + r")\s*(?P<d>" + _DAY + r")(?!\d|:\d)\b" + _YEAR),
    ("month", r"(?:month\s+of\s+)?(?P<mon>" + _MON + ")" + _YEAR),
    ("year", r"(?P<y>(?:19|20)\d{2})(?![\d:/.-])"),
    # 'half past eight', 'quarter to 9 pm': an instant (the part of the day says which eight);
    # before the clocks, or '9 pm' would be read alone
    # 'ten past 7', '20 minutes past 9': minutes past an hour ('ten to 12' stays a range of
    # hours unless the minutes say they are minutes: '10 minutes to 12')
    # 'ten to eight', 'twenty to three': minutes to an hour where, as a range of hours, it
    # would run backwards ('ten to 12' stays 10-12)
    ("bareclock", r"(?:a\s+)?(?P<frac>half|quarter"
                  r"|(?:" + _MINUTE_WORDS + r")(?=\s+(?:past|after))"
                  r"|twenty(?:[- ]five)?(?=\s+to\s+" + _HOUR_WORD + r"\b)"
                  r"|ten(?=\s+to\s+(?:one|two|three|four|five|six|seven|eight|nine|[1-9])\b)"
                  r"|five(?=\s+to\s+(?:one|two|three|four|[1-4])\b)"
                  # 'at five to eight': after 'at' an instant, never a range of hours
                  r"|(?<=\bat\s)(?:five|ten)(?=\s+to\s+" + _HOUR_WORD + r"\b)"
                  r"|(?:\d{1,2}|" + _MINUTE_WORDS + r")\s+min(?:ute)?s?)"
                  r"\s+(?P<rel>past|after|to)\s+"
                  r"(?P<bh>" + _HOUR_WORD + r"|midnight|noon|midday)\b"
                  r"(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?"),
    # 'half six pm', 'at half six': half past six, as said in Britain (with am/pm, or after a
    # word that puts a time there)
    ("bareclock", r"(?P<half>half)\s+(?P<bh>" + _HOUR_WORD + r")\s*(?P<bap>[ap]\.?m\.?(?![a-z]))"),
    ("bareclock", r"(?:(?<=\bat\s)|(?<=\bfrom\s)|(?<=\btill\s)|(?<=\buntil\s))(?P<half>half)\s+"
                  r"(?P<bh>" + _HOUR_WORD + r")\b(?![\d:.%])"),
    # "between 8 and 9", "from 10 to 11am", "9 to 10 am", "2-4pm", "10pm to 6am": hours without
    # minutes, read only after 'between'/'from' or with am/pm (so 'nodes 10-14' stays nodes)
    # '20-22h', '8h-10h': hours written with the 24-hour 'h'
    ("hours", r"(?<![\d:.\w-])(?P<h0>\d{1,2})(?:h(?![a-z]))?"
              r"(?:\s*(?P<ap0>[ap]\.?m\.?(?![a-z])))?\s*"
              r"(?:[-–—]|to|and|until|till)\s*(?P<h1>\d{1,2})(?:h(?![a-z]))?"
              r"(?:\s*(?P<ap1>[ap]\.?m\.?(?![a-z])))?"
              r"(?![\d:.])(?!\s*(?:%|°|w\b|kw\b|nodes?\b|gpus?\b|jobs?\b|racks?\b))" + _ZONE),
    ("clock", r"(?<![\d:.])" + _CLOCK + _ZONE),
    # 'around 11', 'about 3pm': an hour without minutes, as one instant
    # '3 o'clock' is an instant, 'the 8 o'clock hour' the hour from 08:00
    ("bareclock", r"(?P<bh>\d{1,2})\s*o['’]?\s*clock\b(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?"
                  r"(?P<whole>\s+hour\b)?"),
    # 'between 6 and noon', 'from 6 to noon': an hour alone starts a range that noon ends
    ("bareclock", r"(?:(?<=\bbetween\s)|(?<=\bfrom\s))(?P<bh>\d{1,2})(?P<opens>)(?=\s*(?:[-–—]|to"
                  r"|and|till|until)\s*(?:noon|midday|midnight)\b)"),
    # 'between midnight and 6', 'midnight to 4': an hour alone ends a range that midnight starts
    ("bareclock", r"(?:(?<=\bmidnight\sand\s)|(?<=\bmidnight\sto\s)|(?<=\bmidnight\still\s)"
                  r"|(?<=\bmidnight\suntil\s)|(?<=\bmidnight\s-\s)|(?<=\bmidnight-))"
                  r"(?P<bh>\d{1,2})\b(?![\d:.%])(?!\s*[ap]\.?m)"),
    # 'noon to 1', 'noon till 2': after noon, an hour alone is in the afternoon
    ("bareclock", r"(?:(?<=\bnoon\sto\s)|(?<=\bnoon\still\s)|(?<=\bnoon\s-\s)|(?<=\bnoon-)"
                  r"|(?<=\bnoon\suntil\s))(?P<bh>\d{1,2})(?P<after_noon>)\b(?![\d:.%])"
                  r"(?!\s*[ap]\.?m)"),
    ("bareclock", r"(?:(?<=\baround\s)|(?<=\babout\s))(?P<bh>\d{1,2})"
                  r"(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?(?![\d:.%])(?!\s*(?:w|kw|°|c|nodes?|gpus?|jobs?|racks?|percent)\b)"),
    # 'from 09:45 till 10', 'from quarter to ten till ten': an hour alone ends a range
    ("bareclock", r"(?:(?<=\btill\s)|(?<=\buntil\s))(?P<bh>" + _HOUR_WORD + r")"
                  r"(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?"
                  r"(?![\d:.%])(?!\s*(?:w|kw|°|c|nodes?|gpus?|jobs?|racks?|percent|days?|hours?"
                  r"|minutes?|mins?|weeks?|months?)\b)"),
    # 'at 3 in the afternoon', 'at 9 this morning': the part of the day says which 3 (below)
    ("bareclock", r"(?<=\bat\s)(?P<bh>\d{1,2})(?![\d:.])(?=\s+(?:in\s+the|this|that|yesterday"
                  r"|today)\s+(?:<PART>)\b)"),
    # 'between ten and eleven': hours in words start a range that the next hour ends
    ("bareclock", r"(?<=\bbetween\s)(?P<bh>" + _HOUR_WORD + r")"
                  r"(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?(?=\s+and\s+" + _HOUR_WORD + r"\b)"),
    # 'between quarter to ten and ten', 'between 9:45 and ten': an hour alone ends a range that
    # a time after 'between' starts (kept only there: ``_paired``; 'nodes 3 and 10' stay ids)
    # 'between 10 and half 11', 'from 5 till half 5': an hour alone starts a range that a half
    # (or quarter) hour ends
    ("bareclock", r"(?:(?<=\bbetween\s)|(?<=\bfrom\s))(?P<bh>\d{1,2})(?P<opens>)(?=\s*(?:and|to"
                  r"|till|until)\s+(?:half|quarter)\s+(?:past\s+|to\s+)?" + _HOUR_WORD + r"\b)"),
    ("andclock", r"(?<=\band\s)(?:(?P<half>half)\s+)?(?P<bh>" + _HOUR_WORD + r")"
                 r"(?:\s*(?P<bap>[ap]\.?m\.?(?![a-z])))?"
                 r"(?![\d:.%])(?!\s*(?:w|kw|°|c|nodes?|gpus?|jobs?|racks?|users?|percent|days?"
                 r"|hours?|minutes?|mins?|weeks?|months?|of)\b)"),
    # the parts of the day are data (ontology/lexicon.yaml, day_parts): <PART> is their words
    ("part", r"(?P<part><PART>)(?:\s+of)?\b"),
    ("noop", r"\(?\s*(?:full|whole|entire)\s+day\s*\)?"),
    ("suspect", r"(?<![\d])\d{1,3}(?:st|nd|rd|th)\s+of\s+(?!the\b)[a-z]+"),
    ("suspect", r"(?-i:(?<![\d])\d{1,2}(?:st|nd|rd|th)?\s+[A-Z][a-z]{2,8},?\s+\d{4})(?!\d)"),
    # 'the first week of june or the second (8-14)', 'june 1-7 vs 8-14': the month of the
    # week or days said just before (``_borrowed``); last, so that hours claim their words first
    ("weeknext", _AFTER_PAIRING + r"(?:the\s+)?(?P<o>first|second|third|fourth|fifth|last)"
                 r"(?:\s+(?:one|week))?" + _SAID_DAYS
                 + r"(?!\s*(?:day|hour|minute|node|job|rack|gpu|user|of)\w*)(?![\w-])"),
    ("daynext", _AFTER_PAIRING + r"(?P<d0>\d{1,2})\s*[-–]\s*(?P<d1>\d{1,2})"
                r"(?![\d:.]|\s*(?:h\b|hrs?\b|[ap]\.?m|o.?clock|%|w\b|c\b|°|nodes?|racks?|jobs?))"),
)  # fmt: skip


@functools.cache
def _compiled(parts: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kind, re.compile(_LEAD + "(?P<core>" + body.replace("<PART>", parts) + ")",
                                   re.IGNORECASE)) for kind, body in _PATTERNS)  # fmt: skip


def _names_past_noon(text: str) -> bool:
    parts = load_day_parts()
    found = _compiled(day_part_pattern())
    pattern = next(p for kind, p in found if kind == "part")
    return any(parts[" ".join(m["part"].lower().split())].end > 12
               for m in pattern.finditer(text))  # fmt: skip


@functools.cache
def _before_part(parts: str) -> re.Pattern[str]:
    """'6 till 9 in the morning': hours right before a part of the day."""
    return re.compile(r"^[\s,]*(?:in\s+the\s+|this\s+|that\s+)?(?:" + parts + r")\b",
                      re.IGNORECASE)  # fmt: skip


@functools.cache
def _after_part(parts: str) -> re.Pattern[str]:
    """'first thing, 6 till 9', 'lunchtime (12 till 2)': hours right after a part of the day."""
    return re.compile(r"\b(?:" + parts + r")[\s,(]*$", re.IGNORECASE)


# a month with neither day nor year is a date only after one of these ("the query may fail")
_MONTH_LEADS = (
    "in",
    "during",
    "for",
    "throughout",
    "since",
    "over",
    "from",
    "between",
    "until",
    "across",
)
# Whole month names that are no everyday word ('may', 'march' are): said alone, still the month
_WHOLE_MONTH_NAMES = frozenset(
    {
        "january",
        "february",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    }
)
_ZONES = {"utc": 0, "gmt": 0, "cet": 60, "cest": 120, "z": 0}
_GRANULARITY = (
    (r"\b(?:per[\s-]minute|each\s+minute|every\s+minute|minutely)\b", "minute"),
    (r"\b(?:hourly|per[\s-]hour|each\s+hour|every\s+hour|by\s+hour)\b", "hour"),
    (r"\b(?:daily|per[\s-]day|each\s+day|every\s+day|by\s+day|day[\s-]by[\s-]day)\b", "day"),
    (r"\b(?:weekly|per[\s-]week|each\s+week|every\s+week|by\s+week)\b", "week"),
    (r"\b(?:monthly|per[\s-]month|each\s+month|every\s+month|by\s+month)\b", "month"),
)


@dataclass(frozen=True)
class _Clock:
    sec: int  # seconds after midnight (86400 = 24:00)
    tz: timezone | None
    bump: int = 0  # added when the clock closes a window (HH:59 → next minute, midnight → 24:00)
    meridiem: bool = False  # am/pm was written


@dataclass(frozen=True)
class _Days:
    """Inclusive calendar days (month, day); a negative day counts from the month's end."""

    year: int | None
    m0: int
    d0: int
    m1: int
    d1: int

    @property
    def single(self) -> bool:
        return (self.m0, self.d0) == (self.m1, self.d1)


@dataclass(frozen=True)
class _Atom:
    kind: str
    start: int  # full span, lead word included
    end: int
    core: int  # where the phrase proper starts (after the lead word)
    lead: str = ""
    days: tuple[_Days, ...] = ()  # alternatives: two only for an ambiguous numeric date
    clocks: tuple[_Clock, ...] = ()
    rel: tuple[str, int, str] = ("", 0, "")
    message: str = ""
    left: _Atom | None = None
    right: _Atom | None = None
    part: str = ""  # 'morning', 'afternoon', ...: a part of the day (kind clocks)


class _UnparseableError(Exception):
    pass


class _AmbiguousError(Exception):
    def __init__(self, message: str, candidates: tuple[ParsedWindow, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates


def _month(word: str) -> int:
    return _MONTHS.index(word[:3].lower()) + 1


def _day_num(word: str) -> int:
    return _ORD_WORDS.get(word.lower()) or int(re.sub(r"\D", "", word))


def _days_ok(d: _Days) -> bool:
    for m, day in ((d.m0, d.d0), (d.m1, d.d1)):
        top = calendar.monthrange(d.year or 2000, m)[1] if 1 <= m <= 12 else 0  # 2000: leap
        if top == 0 or not (1 <= day <= top or -top <= day < 0):
            return False
    return True


def _zone(m: re.Match[str]) -> timezone | None:
    """The zone written after a clock (Z, +02:00, UTC, CEST), or None."""
    if not (m.group("tz") or m.group("tzn")):
        return None
    raw = (m.group("tz") or m.group("tzn")).lower()
    if raw in _ZONES:
        return timezone(timedelta(minutes=_ZONES[raw]))
    sign = -1 if raw[0] == "-" else 1
    digits = raw[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _clock(m: re.Match[str]) -> _Clock | None:
    """Read a clock match; None when it is not a time of day (25:00, 13pm)."""
    tz = _zone(m)
    if m.group("named"):
        named = m.group("named").lower()
        # noon and midnight are as sure of their half of the day as '8pm'
        return (_Clock(0, tz, 86400, meridiem=True) if named == "midnight"
                else _Clock(12 * 3600, tz, meridiem=True))  # fmt: skip
    h = int(m.group("h") or m.group("h2"))
    mi, s = int(m.group("mi") or 0), m.group("s")
    ap = (m.group("ap") or m.group("ap2") or "").lower()[:1]
    if ap:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ap == "p" else 0)
    if mi > 59 or (s is not None and int(s) > 59) or h > 24 or (h == 24 and (mi or s)):
        return None
    bump = (1 if int(s) == 59 else 0) if s is not None else (60 if mi == 59 else 0)
    # '08:00' is a 24-hour clock: as sure of its half of the day as '8am'
    said = bool(ap) or (m.group("h") or "").startswith("0")
    return _Clock(h * 3600 + mi * 60 + int(s or 0), tz, bump, meridiem=said)


def _hours(base: _Atom, bad: _Atom, m: re.Match[str], lead: str) -> _Atom | None:
    """Two bare hours as a clock range; am/pm written once holds for both where it can
    ('2 and 4pm' is 14-16, '11 to 1pm' 11-13); 'pm to am' crosses midnight."""
    ap0, ap1 = ((m[g] or "").lower()[:1] for g in ("ap0", "ap1"))
    h0, h1 = int(m["h0"]), int(m["h1"])
    before = m.string[: m.start()]
    after = m.string[m.end() :]
    # '9-12 jun 1' is hours, but not 'nodes 0, 1 and 20, 1 Jun' (a list of ids goes on)
    dated = bool(_BEFORE_DATE.match(after)) and not re.search(r"\band\b", m.group(0), re.I) \
        and not _IN_ID_LIST.search(before)  # fmt: skip
    paired = _PAIRED_HOURS.match(after)
    # '8-12 vs 14-18 on jun 1': hours compared with the day's other hours are that day's too
    dated = dated or (
        paired is not None
        and not _IN_ID_LIST.search(before)
        and bool(
            _BEFORE_DATE.match(after[paired.end() :])
            or _BEFORE_DAY_WORD.match(after[paired.end() :])
        )
    )
    beside_day = (_AFTER_DATE.search(before) or _AFTER_DAY_WORD.search(before)
                  or _BEFORE_DAY_WORD.match(after) or dated
                  or _after_part(day_part_pattern()).search(before)
                  or _before_part(day_part_pattern()).match(after))  # fmt: skip
    # hours that descend ('12 till 2') run past noon only where a part of the day past noon
    # says so ('over lunchtime jun 1 (12 till 2)'); alone they are no range ('on 1 June 12-4')
    past_noon = 1 <= h1 < h0 <= 12 and _names_past_noon(m.string)
    after_date = (beside_day and (h0 < h1 <= 24 or past_noon)
                  and not _AFTER_NOUN.search(before))  # fmt: skip
    if lead not in ("between", "from") and not (ap0 or ap1) and not after_date:
        return None  # '1 June 10-11' (right after a date, that day's hours) reads on

    def hour(h: int, ap: str) -> int | None:
        if not ap:
            return h if 0 <= h <= 24 else None
        return h % 12 + (12 if ap == "p" else 0) if 1 <= h <= 12 else None

    end = hour(h1, ap1)
    start = hour(h0, ap0 or ap1)
    if not (ap0 or ap1) and past_noon:
        end = h1 + 12
    if not ap0 and ap1 and start is not None and end is not None and start >= end:
        start = hour(h0, "a")  # '11 to 1pm'
    if start is None or end is None:
        return replace(bad, message=f"{m.group(0).strip()!r} is not a range of hours")
    if ap0 == "p" and ap1 == "a" and end <= start:
        end += 24  # '10pm to 6am': the next morning
    tz = _zone(m)
    return replace(base, kind="clocks", clocks=(_Clock(start * 3600, tz), _Clock(end * 3600, tz)))


_AFTER_DATE = re.compile(
    r"(?:(?<![\d.,/:-])"
    + _DAY
    + r"(?:\s+of)?\s+"
    + _MON
    + r"|"
    + _MON
    + r"\s+"
    + _DAY
    + r"|\d{4}-\d{1,2}-\d{1,2})(?:,?\s+\d{4})?[\s,(]*$",
    re.IGNORECASE,
)
# 'yesterday 8-9', '8-9 yesterday', 'wed 10-11': hours beside a named day ('nodes 10-14
# yesterday' stays nodes)
# ('this morning 9 to 10', 'yesterday afternoon 2-3': a part of a named day too)
_DAY_WORD = (
    r"(?:yesterday|yday|yest|today|tomorrow|" + _WEEKDAYS + "|" + _WEEKDAY_ABBR + r")"
    r"(?:\s+(?:morning|afternoon|evening|night))?"
    r"|\b(?:this|that)\s+(?:morning|afternoon|evening)|\btonight"
)
_AFTER_DAY_WORD = re.compile(r"\b(?:" + _DAY_WORD + r")[\s,(]*$", re.IGNORECASE)
_BEFORE_DAY_WORD = re.compile(r"^[\s,]*(?:on\s+)?(?:" + _DAY_WORD + r")\b", re.IGNORECASE)
# a plural id keyword whose list is still going on: 'nodes 0, 3-5 jun 1' are nodes
_IN_ID_LIST = re.compile(r"\b(?:nodes|racks|jobs|users|gpus|cpus)\s+(?:[\d\s,\-–]|\band\b)*$",
                         re.IGNORECASE)  # fmt: skip
# '9-12 jun 1', '9-12 on 1 june': hours just before a date are that day's hours
_BEFORE_DATE = re.compile(
    r"^[\s,]*(?:on\s+)?(?:" + _MON + r"\s+\d{1,2}(?:st|nd|rd|th)?(?!\d|:\d)|\d{1,2}(?:st|nd|rd|th)?"
    r"\s+(?:of\s+)?" + _MON + ")",
    re.IGNORECASE,
)
# ' vs 14-18', ' and 14 to 18h': a second range of hours after the first
_PAIRED_HOURS = re.compile(
    r"^\s*(?:vs\.?|versus|against|compared\s+(?:to|with)|and|or|then)\s+(?:from\s+|between\s+)?"
    r"\d{1,2}(?::00)?\s*(?:h|hrs?)?\s*(?:[-–]|to|till|until|and)\s*\d{1,2}(?::00)?\s*(?:h\b|hrs?\b)?",
    re.IGNORECASE,
)
_AFTER_NOUN = re.compile(r"\b(?:nodes?|racks?|gpus?|cpus?|jobs?|users?|ids?)[\s,]*$", re.I)
# '[2022-06-01 10:00:00]': the strict bracketed form some tools write; brackets become spaces
# (same length, so spans still index the question).
_BRACKETED = re.compile(r"\[(\s*\d{4}-\d{1,2}-\d{1,2}[ T]\d{1,2}:\d{2}(?::\d{2})?\s*)\]")


def _unbracket(text: str) -> str:
    return _BRACKETED.sub(lambda m: f" {m.group(1)} ", text)


def _atom(kind: str, m: re.Match[str], start: int) -> _Atom | None:
    """Build an atom from a match; None rejects the match (e.g. a bare 'may' with no year)."""
    lead = re.sub(r"\s+", " ", (m.group("lead") or "").lower()) if start == m.start() else ""
    core, end = m.start("core"), m.end()
    phrase = m.group(0)[start - m.start() :].strip()
    base = _Atom(kind, start, end, core, lead)
    bad = replace(base, kind="bad", message=f"cannot read the date or time {phrase!r}")
    groups = m.groupdict()
    year = int(groups["y"]) if groups.get("y") else None
    if kind in (
        "isodt",
        "isodate",
        "numdate",
        "dmy",
        "mdy",
        "dayrange",
        "week",
        "fortnight",
        "ordday",
        "month",
        "edgedays",
    ):
        if kind in ("isodt", "isodate"):
            spans = [_Days(year, int(m["m"]), int(m["d"]), int(m["m"]), int(m["d"]))]
        elif kind == "numdate":
            a, b = int(m["a"]), int(m["b"])
            orders = [(b, a)] if m["sep"] == "." or a == b else [(b, a), (a, b)]
            spans = [_Days(year, mo, d, mo, d) for mo, d in orders]
        elif kind in ("dmy", "mdy"):
            d = _day_num(m["d"])
            spans = [_Days(year, _month(m["mon"]), d, _month(m["mon"]), d)]
        elif kind == "dayrange":
            mo = _month(m["mon"])
            first = _day_num(m["d0"] or m["b0"] or m["b1"])
            spans = [_Days(year, mo, first, mo, _day_num(m["d1"]))]
        elif kind == "week":
            mo, o = _month(m["mon"]), _day_num(m["o"])
            first, last = (-7, -1) if o == -1 else (7 * o - 6, -1 if o == 5 else 7 * o)
            if m["pd0"]:  # 'the first week of june (1-7)': the days said win
                first, last = int(m["pd0"]), int(m["pd1"])
            spans = [_Days(year, mo, first, mo, last)]
        elif kind == "fortnight":
            mo, o = _month(m["mon"]), _day_num(m["o"])
            first, last = (-14, -1) if o == -1 else (1, 14) if o == 1 else (15, -1)
            if m["pd0"]:
                first, last = int(m["pd0"]), int(m["pd1"])
            spans = [_Days(year, mo, first, mo, last)]
        elif kind == "ordday":
            mo, d = _month(m["mon"]), _day_num(m["o"])
            spans = [_Days(year, mo, d, mo, d)]
        elif kind == "edgedays":
            mo = _month(m["mon"])
            n = _NUM_WORDS.get(m["n"].lower().replace("-", " ")) or int(m["n"])
            first_days = m["edge"].lower() == "first"
            spans = [_Days(year, mo, 1, mo, n) if first_days else _Days(year, mo, -n, mo, -1)]
        else:  # a month alone: "in May 2022"; a bare "may"/"march" is too often not a date
            mo = _month(m["mon"])
            # 'June wind speed by hour of day': a month's whole name said alone names it
            named = m["mon"].lower() in _WHOLE_MONTH_NAMES
            if year is None and lead not in _MONTH_LEADS and not named:
                return None
            spans = [_Days(year, mo, 1, mo, -1)]
        spans = [s for s in spans if _days_ok(s)]
        if not spans or (kind == "dayrange" and spans[0].d1 < spans[0].d0):
            return replace(bad, message=f"{phrase!r} is not a calendar date or day range")
        if kind == "isodt":
            clock = _clock(m)
            return replace(base, kind="point", days=(spans[0],), clocks=(clock,)) if clock else bad
        return replace(base, kind="days", days=tuple(spans))
    if kind in ("weeknext", "daynext"):
        # the month and year come from the days said before (``_borrowed``)
        if groups.get("pd0") or kind == "daynext":
            d0 = int(groups.get("pd0") or groups["d0"])
            d1 = int(groups.get("pd1") or groups["d1"])
        else:
            o = _day_num(m["o"])
            d0, d1 = (-7, -1) if o == -1 else (7 * o - 6, -1 if o == 5 else 7 * o)
        return replace(base, kind="borrow", rel=(kind, d0, str(d1)))
    if kind == "year":
        if lead not in ("in", "during", "throughout", "since"):
            return None
        return replace(base, kind="days", days=(_Days(year, 1, 1, 12, -1),))
    if kind == "hours":
        return _hours(base, bad, m, lead)
    if kind in ("bareclock", "andclock"):
        word = m["bh"].lower()
        h, ap = (
            (
                int(word)
                if word.isdigit()
                else {"midnight": 0, "noon": 12, "midday": 12}.get(word, _NUM_WORDS.get(word, 99))
            ),
            (groups.get("bap") or "").lower()[:1],
        )
        if ap:
            h = h % 12 + (12 if ap == "p" else 0) if 1 <= h <= 12 else 99
        if not 0 <= h <= 23:
            if kind == "andclock" and not ap:
                return None  # 'nodes 40 and 41': a number after 'and' that is no hour is no time
            return replace(bad, message=f"{phrase!r} is not a time of day")
        minutes = 30 if groups.get("half") else 0
        if groups.get("frac"):  # 'half past eight' 08:30, 'quarter to nine' 08:45
            frac = " ".join(re.sub(r"\s*min(?:ute)?s?$", "", m["frac"].lower()).split())
            minutes = (
                {"half": 30, "quarter": 15}.get(frac)
                or _MINUTES.get(frac)
                or int(frac if frac.isdigit() else 0)
            )
            if not 0 < minutes < 60 or (frac == "half" and m["rel"].lower() == "to"):
                return replace(bad, message=f"{phrase!r} is not a time of day")
            if m["rel"].lower() == "to":
                h, minutes = (h - 1) % 24, 60 - minutes
        if groups.get("after_noon") is not None and 1 <= h < 12:
            h += 12
        if groups.get("whole"):  # 'the 8 o'clock hour'
            hour = (_Clock(h * 3600, None), _Clock((h + 1) * 3600, None))
            return replace(base, kind="clocks", clocks=hour)
        # 'till ten' ends a window (an open end, as 'till 10:00'), 'between 6 and noon' starts
        # one; other bare clocks are instants
        opens = groups.get("opens") is not None
        kept = lead if lead in ("until", "till", "between") or (opens and lead == "from") else ""
        clock = _Clock(h * 3600 + minutes * 60, None, meridiem=bool(ap))
        pairs = ("and", 0, "") if kind == "andclock" else ("", 0, "")
        return replace(base, kind="clock", lead=kept, clocks=(clock,), rel=pairs)
    if kind == "clock":
        clock = _clock(m)
        if clock is None:
            return replace(bad, message=f"{phrase!r} is not a time of day")
        return replace(base, clocks=(clock,))
    if kind == "edge":
        word = m["n"].lower().replace("-", " ")
        n = int(word) if word.isdigit() else _NUM_WORDS.get(word, 0)
        seconds = n * (3600 if m["unit"].lower().startswith("h") else 60)
        if word == "half":  # 'the last half hour of june 1'
            seconds = 1800 if m["unit"].lower().startswith("h") else 30
        if not 0 < seconds <= 86400:
            return replace(bad, message=f"{phrase!r} is not a part of one day")
        first = m["edge"].lower() == "first"
        span = (0, seconds) if first else (86400 - seconds, 86400)
        return replace(base, kind="clocks", clocks=(_Clock(span[0], None), _Clock(span[1], None)))
    if kind == "part":
        word = " ".join(m["part"].lower().split())
        part = load_day_parts()[word]
        return replace(
            base,
            kind="clocks",
            clocks=(_Clock(part.start * 3600, None), _Clock(part.end * 3600, None)),
            part=word,
        )
    if kind in ("rel", "reln"):
        which = re.sub(r"\s+", " ", m["which"].lower())
        which = "yesterday" if which in ("yday", "yest") else which
        if which == "last night":
            night = _night_day(m.string[m.end() :])
            if night is None:
                return None  # unread: the accounting quotes it
            which = night
        n = 0 if kind == "rel" else _NUM_WORDS.get(m["n"].lower().replace("-", " "), 0)
        if kind == "reln" and not n:
            n = int(m["n"]) if m["n"].isdigit() else 0
        unit = (groups.get("unit") or "day").lower()
        unit = {"h": "hour", "hr": "hour", "hrs": "hour", "min": "minute", "mins": "minute"}.get(
            unit, unit.rstrip("s")
        )
        if kind == "reln" and n == 0:
            return replace(bad, message=f"{phrase!r} asks for an empty window")
        return replace(base, kind="rel", rel=(which, n, unit))
    if kind == "weekday":
        name = (groups.get("wd") or groups.get("wa") or "").lower()
        day = next(i for i, w in enumerate(_WEEKDAY_NAMES) if w.startswith(name[:3]))
        last = (groups.get("wlast") or "").lower() in ("last", "past", "previous")
        return replace(base, kind="rel", rel=("last weekday" if last else "weekday", day, "day"))
    if kind == "monthday":
        md = m.groupdict().get("md") or str(_ORD_WORDS.get((m["mw"] or "").lower(), 0))
        day = int(md)
        if not 1 <= day <= 31:
            return replace(bad, message=f"{phrase!r} is not a day of the month")
        return replace(base, kind="rel", rel=("monthday", day, "day"))
    if kind == "shift":
        return replace(base, rel=("", 1, m["unit"].lower()))
    if kind == "suspect":  # "45th of Smarch": only after "on" or before a capitalised word
        word = re.findall(r"[a-z]+", m.group("core"), re.IGNORECASE)[-1]
        return bad if lead == "on" or word[:1].isupper() else None
    return base  # noop


def _lex(text: str) -> list[_Atom]:
    """Find every temporal phrase, earlier patterns first; later ones may not overlap them."""
    taken = [False] * (len(text) + 1)
    atoms: list[_Atom] = []
    for kind, pattern in _compiled(day_part_pattern()):
        for m in pattern.finditer(text):
            start = m.start()
            if any(taken[start : m.end()]):
                start = m.start("core")  # the lead word may belong to an earlier phrase
                if any(taken[start : m.end()]):
                    continue
            atom = _atom(kind, m, start)
            if atom is not None:
                atoms.append(atom)
                taken[atom.start : atom.end] = [True] * (atom.end - atom.start)
    return _borrowed(text, sorted(atoms, key=lambda a: a.start))


def _borrowed(text: str, atoms: list[_Atom]) -> list[_Atom]:
    """'or the second', 'vs 8-14': days of the month of the day range said just before them
    (within a few words); with none before, the words are no time."""
    out: list[_Atom] = []
    for a in atoms:
        if a.kind == "clock" and a.rel[0] == "and":
            prev = out[-1] if out else None
            if (prev is not None and prev.kind in ("clock", "point") and prev.lead == "between"
                    and text[prev.end : a.start].strip().lower() == "and"):  # fmt: skip
                out.append(replace(a, rel=("", 0, "")))
            continue
        if a.kind != "borrow":
            out.append(a)
            continue
        prev = out[-1] if out else None
        near = prev is not None and a.start - prev.end <= 12
        if prev is None or not near or prev.kind != "days" or len(prev.days) != 1:
            continue
        (d,) = prev.days
        if d.single or d.m0 != d.m1:
            continue  # a day range of one month only: '1 June or the second' is no week
        first, last = a.rel[1], int(a.rel[2])
        days = _Days(d.year, d.m0, first, d.m0, last)
        if _days_ok(days) and (first < 0 or last < 0 or first <= last):
            out.append(replace(a, kind="days", days=(days,), rel=("", 0, "")))
    return out


def time_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Character spans of the temporal phrases in ``text`` (no reference time needed)."""
    return tuple((a.start, a.end) for a in _lex(_unbracket(text)))


# --- composing ----------------------------------------------------------------------------------

_POINT_GAP = re.compile(r"[\s,]*(?:at\s+)?", re.IGNORECASE)
# '10pm jun 5 to 2am jun 6': a clock right before its date, nothing between
_PLAIN_GAP = re.compile(r"[ ,]{1,2}")
_ON_GAP = re.compile(r"[\s,]*on\s+(?:the\s+)?", re.IGNORECASE)
_OPEN_LEADS = ("from", "after", "since", "until", "till", "before", "by", "up to", "starting at")
# Brackets may close the first end and open the second: "[2022-06-01 08:00:00] to [… 09:00:00]"
# (the strict form SoTA#1 takes) is one window, not two instants.
_RANGE_GAP = re.compile(r"[\s\])]*(?:[-–—/]|to|until|till|through|thru|and)[\s\[(]*", re.IGNORECASE)


def _date_then_clock(day: _Atom, clock: _Atom) -> bool:
    return day.kind == "days" and day.days[0].single and clock.kind == "clock"


def _merge(text: str, atoms: list[_Atom]) -> list[_Atom]:
    """Join a date with its clock into a point, then two ends into a range."""

    def gap(a: _Atom, b: _Atom) -> str:
        return text[a.end : b.core]

    points: list[_Atom] = []
    i = 0
    while i < len(atoms):
        a, b = atoms[i], atoms[i + 1] if i + 1 < len(atoms) else None
        if b is not None and _date_then_clock(a, b) and _POINT_GAP.fullmatch(gap(a, b)):
            points.append(replace(a, kind="point", end=b.end, clocks=b.clocks))
            i += 2
            continue
        if (
            b is not None
            and _date_then_clock(b, a)
            and (_ON_GAP.fullmatch(gap(a, b)) or _PLAIN_GAP.fullmatch(gap(a, b)))
        ):
            # "08:00 on 1 June": the point keeps the clock's place and lead
            points.append(replace(b, kind="point", start=a.start, core=a.core, lead=a.lead,
                                  clocks=a.clocks))  # fmt: skip
            i += 2
            continue
        points.append(a)
        i += 1
    ends = ("days", "point", "clock")
    out: list[_Atom] = []
    i = 0
    while i < len(points):
        a, b = points[i], points[i + 1] if i + 1 < len(points) else None
        if b is not None and a.kind in ends and b.kind in ends:
            g = gap(a, b)
            joined = _RANGE_GAP.fullmatch(g) and ("and" not in g.lower() or a.lead == "between")
            if joined and not (a.kind == "days" and b.kind == "clock"):
                kind = "clocks" if a.kind == b.kind == "clock" else "span"
                zones = [c.tz for c in a.clocks + b.clocks if c.tz is not None]
                if zones:  # a zone written on one end holds for both
                    a, b = (
                        replace(x, clocks=tuple(replace(c, tz=c.tz or zones[0]) for c in x.clocks))
                        for x in (a, b)
                    )
                clocks = _meridiem_shared(a.clocks[0], b.clocks[0]) if kind == "clocks" else ()
                if kind == "span" and a.kind == "clock" and b.kind == "point":
                    # 'between two and four pm on june 5': the pm holds for the start too
                    a = replace(a, clocks=_meridiem_shared(a.clocks[0], b.clocks[0])[:1])
                out.append(
                    _Atom(kind, a.start, b.end, a.core, a.lead, clocks=clocks, left=a, right=b)
                )
                i += 2
                continue
        out.append(points[i])
        i += 1
    return out


def _meridiem_shared(start: _Clock, end: _Clock) -> tuple[_Clock, _Clock]:
    """'from half six till half seven pm': a pm written on the end only holds for the start too
    where the start would otherwise lie more than twelve hours before it."""
    if (end.meridiem and not start.meridiem and end.sec >= 12 * 3600 and start.sec < 12 * 3600
            and start.sec + 12 * 3600 < end.sec):  # fmt: skip
        return replace(start, sec=start.sec + 12 * 3600), end
    return start, end


@dataclass(frozen=True)
class _Ctx:
    text: str
    as_of: datetime
    years: tuple[tuple[int, int], ...]  # (position, year) of every date that writes its year
    choice: int
    hint: str | None


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    year, month = d.year + y, m + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def _at(day: date, clock: _Clock | None = None, *, end: bool = False) -> datetime:
    tz = clock.tz if clock is not None and clock.tz is not None else UTC
    sec = 0 if clock is None else clock.sec + (clock.bump if end else 0)
    return (datetime(day.year, day.month, day.day, tzinfo=tz) + timedelta(seconds=sec)).astimezone(
        UTC
    )


def _dates(atom: _Atom, ctx: _Ctx) -> tuple[date, date]:
    """Resolve a day-like atom to ``[first day, day after the last)``."""
    spec = atom.days[min(ctx.choice, len(atom.days) - 1)]

    def bounds(year: int) -> tuple[date, date]:
        out = []
        for m, d in ((spec.m0, spec.d0), (spec.m1, spec.d1)):
            top = calendar.monthrange(year, m)[1]
            day = top + d + 1 if d < 0 else d
            if not 1 <= day <= top:
                raise _UnparseableError(
                    f"{ctx.text[atom.core : atom.end]!r} is not a calendar date in {year}"
                )
            out.append(date(year, m, day))
        return out[0], out[1] + timedelta(days=1)

    if spec.year is not None:
        return bounds(spec.year)
    if ctx.years:
        return bounds(min(ctx.years, key=lambda py: abs(py[0] - atom.start))[1])
    year = ctx.as_of.year
    # No year and not yet come: the previous one ('1 September' asked in June) — unless it is
    # only days ahead ('18 June' asked on 15 June, 'june 14 through june 16' asked on the 15th):
    # that is this year's, refused or cut at the reference time, not a year-old day answered.
    if _at(bounds(year)[0]) > ctx.as_of + _SOON:
        year -= 1
    return bounds(year)


_SOON = timedelta(days=31)


INSTANT = timedelta(seconds=1)


def _window(ctx: _Ctx, start: datetime, end: datetime, parts: list[_Atom], *,
            instant: bool = False) -> ParsedWindow:  # fmt: skip
    pieces: list[list[int]] = []
    for a in sorted(parts, key=lambda p: p.start):
        if pieces and not ctx.text[pieces[-1][1] : a.start].strip(" ,;"):
            pieces[-1][1] = max(pieces[-1][1], a.end)
        else:
            pieces.append([a.start, a.end])
    phrase = " ".join(ctx.text[s:e].strip() for s, e in pieces)
    if end <= start:
        raise _UnparseableError(
            f"the window {phrase!r} ends ({end:%Y-%m-%d %H:%M}) at or before it starts "
            f"({start:%Y-%m-%d %H:%M} UTC)"
        )
    return ParsedWindow(start, end, phrase, ctx.hint, instant)


def _relative(atom: _Atom, as_of: datetime) -> tuple[datetime, datetime]:
    which, n, unit = atom.rel
    today = as_of.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday())
    month0 = today.replace(day=1)
    year0 = month0.replace(month=1)
    steps = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1),
             "week": timedelta(weeks=1)}  # fmt: skip
    if which == "yesterday":
        return today - timedelta(days=1), today
    if which == "tomorrow":
        return today + timedelta(days=1), today + timedelta(days=2)
    if which in ("weekday", "last weekday"):
        days_back = (today.weekday() - n) % 7
        if days_back == 0 and which == "last weekday":
            days_back = 7
        day = today - timedelta(days=days_back)
        return day, day + timedelta(days=1)
    if which == "monthday":
        day = today.replace(day=1)
        while True:  # the latest month (this one or before) that has that day on or before today
            try:
                candidate = day.replace(day=n)
            except ValueError:
                candidate = None
            if candidate is not None and candidate <= today:
                return candidate, candidate + timedelta(days=1)
            day = datetime.combine(_add_months(day.date(), -1), day.timetz())
    if which == "today":
        return today, today + timedelta(days=1)
    if which.startswith("day before"):
        return today - timedelta(days=2), today - timedelta(days=1)
    rolling = (
        n > 0
        or unit in ("minute", "hour")
        or which == "past"
        or (which == "last" and unit == "day")
    )
    if rolling:
        count = max(n, 1)
        if unit in steps:
            return as_of - count * steps[unit], as_of
        months = count * (12 if unit == "year" else 1)
        back = _add_months(as_of.date(), -months)
        return as_of.replace(year=back.year, month=back.month, day=back.day), as_of
    if which in ("this", "current"):
        start = {"day": today, "week": monday, "month": month0, "year": year0}[unit]
        after = {
            "day": start + timedelta(days=1),
            "week": start + timedelta(weeks=1),
            "month": datetime.combine(_add_months(start.date(), 1), start.timetz()),
            "year": start.replace(year=start.year + 1),
        }
        return start, after[unit]
    if unit == "day":
        return today - timedelta(days=1), today
    if unit == "week":
        return monday - timedelta(weeks=1), monday
    if unit == "month":
        return datetime.combine(_add_months(month0.date(), -1), month0.timetz()), month0
    return year0.replace(year=year0.year - 1), year0


def _shifted(prev: ParsedWindow, unit: str) -> tuple[datetime, datetime]:
    if unit in ("day", "week"):
        step = timedelta(days=1 if unit == "day" else 7)
        return prev.start - step, prev.end - step
    months = 12 if unit == "year" else 1
    start = datetime.combine(_add_months(prev.start.date(), -months), prev.start.timetz())
    whole = all(t.day == 1 and t.time() == datetime.min.time() for t in (prev.start, prev.end))
    if whole:  # whole months stay whole months
        return start, datetime.combine(_add_months(prev.end.date(), -months), prev.end.timetz())
    return start, start + (prev.end - prev.start)


_DAY_RELS = (
    "yesterday",
    "today",
    "tomorrow",
    "day before yesterday",
    "weekday",
    "last weekday",
    "monthday",
)


def _day_of(atom: _Atom, as_of: datetime) -> _Atom:
    """'yesterday', 'today', 'the day before yesterday' as the calendar day they name, so a
    part of the day or a clock can attach to it ('yesterday afternoon')."""
    if atom.kind != "rel" or atom.rel[0] not in _DAY_RELS:
        return atom
    day = _relative(atom, as_of)[0]
    return replace(atom, kind="days", days=(_Days(day.year, day.month, day.day, day.month,
                                                  day.day),))  # fmt: skip


def _narrowed(items: list[_Atom]) -> list[_Atom]:
    """'this morning between 7 and 8': the hours name the window, the part only says which
    half of the day they are in ('this afternoon between 2 and 4' is 14:00-16:00)."""
    out = list(items)
    # hours belong to one part: 'overnight (0-6) vs the afternoon (12-18)' moved overnight's
    # 0-6 into the afternoon too, and the overnight window was lost
    # (but two parts side by side, 'first thing this morning, 6 to 7', share the hours)
    taken: dict[int, int] = {}
    for i, part in enumerate(items):
        if not part.part:
            continue
        for j, other in sorted(enumerate(items), key=lambda jo: abs(jo[0] - i)):
            lo, hi = part.clocks[0].sec, part.clocks[1].sec
            if j in taken:
                hours = out[j].clocks
                if (abs(taken[j] - i) == 1 and hours and lo <= hours[0].sec
                        and hours[-1].sec <= hi):  # fmt: skip
                    out[i] = replace(part, kind="noop")
                continue
            if j != i and other.kind in ("clock", "point") and len(other.clocks) == 1:
                # '10 o'clock yesterday morning', 'at 3 this afternoon': one instant in the part
                (c,) = other.clocks
                if (lo >= 12 * 3600 and c.sec < 12 * 3600 and other.kind == "clock"
                        and not c.meridiem):  # fmt: skip
                    c = replace(c, sec=c.sec + 12 * 3600)
                night = lo == 0 and hi <= 6 * 3600
                if (night and other.kind == "clock" and not c.meridiem
                        and 6 * 3600 <= c.sec < 12 * 3600):  # fmt: skip
                    c = replace(c, sec=c.sec + 12 * 3600)  # 'ten past eleven at night': 23:10
                late = night and c.sec >= 18 * 3600  # the night also holds the late evening
                if (lo <= c.sec < hi or late) and abs(j - i) <= 2:
                    out[j] = replace(other, clocks=(c,))
                    out[i] = replace(part, kind="noop")
                    taken[j] = i
                continue
            if j != i and _wraps(other) and abs(j - i) <= 3 and (lo == 0 or hi >= 24 * 3600):
                # 'overnight …, from 10pm to 2am': the hours are the night the part names
                out[i] = replace(part, kind="noop")
                continue
            if j != i and other.kind == "span" and abs(j - i) <= 2 and other.left is not None:
                # 'late evening jun 1, 8pm till midnight': a dated range that starts in the part
                start = other.left.clocks[:1]
                if start and lo <= start[0].sec < hi:
                    out[i] = replace(part, kind="noop")
                continue
            if j == i or other.kind != "clocks" or other.part or abs(j - i) > 2:
                continue
            c0, c1 = other.clocks
            if (
                lo >= 12 * 3600 and c1.sec <= 12 * 3600 and not (c0.meridiem or c1.meridiem)
            ):  # the afternoon's '2 and 4'
                c0, c1 = replace(c0, sec=c0.sec + 12 * 3600), replace(c1, sec=c1.sec + 12 * 3600)
            if lo <= c0.sec and c1.sec <= hi:
                out[j] = replace(other, clocks=(c0, c1))
                out[i] = replace(part, kind="noop")
                taken[j] = i
    return out


def _wraps(atom: _Atom) -> bool:
    """A range of hours that runs past midnight ('from 10pm to 2am')."""
    return (
        atom.kind == "clocks"
        and len(atom.clocks) == 2
        and (atom.clocks[1].sec <= atom.clocks[0].sec or atom.clocks[1].sec > 24 * 3600)
    )


def _night_of(ctx: _Ctx, items: list[_Atom], before: list[int]) -> tuple[int, int] | None:
    """'overnight jun 5 into jun 6': two days said one after the other, joined by 'into' (or
    'to'), name the night between them; (the first day's item, the second's)."""
    if len(before) < 2:
        return None
    first, second = items[before[-2]], items[before[-1]]
    joined = ctx.text[first.end : second.start].strip(" ,").lower()
    if joined not in ("into", "to", "-", "–", "through", "till", "until"):
        return None
    (a0, a1), (b0, b1) = _dates(first, ctx), _dates(second, ctx)
    if a1 - a0 != timedelta(days=1) or b1 - b0 != timedelta(days=1) or b0 != a1:
        return None
    return before[-2], before[-1]


def _one_dated_day(ctx: _Ctx, items: list[_Atom]) -> date | None:
    """The one day the question's dated times name ('14:00-18:00 on jun 1'), when every dated
    time names that same single day and none is a day alone (those lend their day by place)."""
    if any(a.kind == "days" for a in items):
        return None
    ends = [e for a in items if a.kind == "span" for e in (a.left, a.right)
            if e is not None and e.kind == "point"]  # fmt: skip
    ends += [a for a in items if a.kind == "point"]
    days = {_dates(e, ctx) for e in ends}
    if len(days) != 1:
        return None
    ((day0, day1),) = days
    return day0 if day1 - day0 == timedelta(days=1) else None


def _compose(ctx: _Ctx, items: list[_Atom]) -> list[ParsedWindow]:
    items = _narrowed([_day_of(a, ctx.as_of) for a in items])
    vague = [a for a in items if a.part and a.kind == "clocks" and load_day_parts()[a.part].ask]
    if vague:  # 'first thing' with no hours beside it: no agreed window
        raise _UnparseableError(f"{vague[0].part!r} names no agreed hours; say which, e.g. "
                                f"'{vague[0].part}, 6 till 9'")  # fmt: skip
    placed: list[tuple[int, ParsedWindow]] = []
    day_items = [i for i, a in enumerate(items) if a.kind == "days"]
    used: set[int] = set()
    as_of = ctx.as_of
    shared = _one_dated_day(ctx, items)
    for idx, it in enumerate(items):
        if it.kind not in ("clock", "clocks"):
            continue
        before = [j for j in day_items if j < idx]
        after = [j for j in day_items if j > idx]
        j = before[-1] if before else (after[0] if after else None)
        night = _night_of(ctx, items, before) if _wraps(it) else None
        if night is not None:  # 'jun 5 into jun 6, from 10pm to 2am': from the first night
            j, later = night
            used.add(later)
        parts = [it]
        if j is None and shared is not None:
            # '08:00-12:00 vs 14:00-18:00 on jun 1': the one day said holds for both ranges
            day0, day1 = shared, shared + timedelta(days=1)
        elif j is None:
            day0 = as_of.date()
            day1 = day0 + timedelta(days=1)
        else:
            used.add(j)
            parts.append(items[j])
            day0, day1 = _dates(items[j], ctx)
        c0 = it.clocks[0]
        if it.kind == "clock" and it.lead not in _OPEN_LEADS:  # 'at 11:00': one instant
            point = _at(day0, c0)
            placed.append((min(p.start for p in parts),
                           _window(ctx, point, point + INSTANT, parts, instant=True)))  # fmt: skip
            continue
        if it.kind == "clock":  # an open end: from/after 08:00, until 08:00, since 08:00
            if it.lead in ("since",):
                start, end = _at(day0, c0), as_of
            elif it.lead in ("until", "till", "before", "by", "up to"):
                start, end = _at(day0), _at(day0, c0, end=True)
            else:
                start, end = _at(day0, c0), _at(day1)
        else:
            start, end = _at(day0, c0), _at(day0, it.clocks[1], end=True)
            if night is not None and end <= start:  # '22:00 to 02:00' of the night named
                end = _at(day0 + timedelta(days=1), it.clocks[1], end=True)
        if day1 - day0 > timedelta(days=1):
            whole = _window(ctx, _at(day0), _at(day1), parts)
            span = _window(
                ctx, start, _at(day1 - timedelta(days=1), it.clocks[-1], end=True), parts
            )
            raise _AmbiguousError(
                f"{whole.text!r} puts a time of day on several days: the continuous span from the "
                "first day to the last, or the whole days? Name one start and one end",
                (span, whole),
            )
        placed.append((min(p.start for p in parts), _window(ctx, start, end, parts)))
    for idx, it in enumerate(items):
        if it.kind == "days" and idx not in used:
            day0, day1 = _dates(it, ctx)
            start, end = _at(day0), (as_of if it.lead == "since" else _at(day1))
            placed.append((it.start, _window(ctx, start, end, [it])))
        elif it.kind == "point":
            day0 = _dates(it, ctx)[0]
            point = _at(day0, it.clocks[0])
            if it.lead == "since":
                start, end = point, as_of
            elif it.lead in ("from", "after", "starting at", "starting from", "starting on"):
                start, end = point, _at(day0 + timedelta(days=1))
            elif it.lead in ("until", "till", "before", "by", "up to"):
                start, end = _at(day0), _at(day0, it.clocks[0], end=True)
            else:  # 'at 11:00 on 1 June': one instant
                placed.append((it.start, _window(ctx, point, point + INSTANT, [it], instant=True)))
                continue
            placed.append((it.start, _window(ctx, start, end, [it])))
        elif it.kind == "span":
            left, right = cast(_Atom, it.left), cast(_Atom, it.right)
            if left.kind == "clock":  # 08:00 to 15:00 on 1 June: the start borrows the date
                start = _at(_dates(right, ctx)[0], left.clocks[0])
            else:
                day0 = _dates(left, ctx)[0]
                start = _at(day0, left.clocks[0] if left.kind == "point" else None)
            if right.kind == "clock":
                end = _at(_dates(left, ctx)[0], right.clocks[0], end=True)
            elif right.kind == "point":
                end = _at(_dates(right, ctx)[0], right.clocks[0], end=True)
            else:
                end = _at(_dates(right, ctx)[1])
            placed.append((it.start, _window(ctx, start, end, [it])))
        elif it.kind == "rel":
            start, end = _relative(it, as_of)
            placed.append((it.start, _window(ctx, start, end, [it])))
    placed.sort(key=lambda p: p[0])
    for it in (a for a in items if a.kind == "shift"):
        earlier = [w for pos, w in placed if pos < it.start]
        if not earlier:
            raise _UnparseableError(
                f"{ctx.text[it.start : it.end].strip()!r} refers to no earlier period"
            )
        start, end = _shifted(earlier[-1], it.rel[2])
        placed.append((it.start, _window(ctx, start, end, [it])))
        placed.sort(key=lambda p: p[0])
    return [w for _, w in placed]


def _granularity(text: str) -> str | None:
    found = []
    for pattern, name in _GRANULARITY:
        m = re.search(pattern, text, re.IGNORECASE)
        if m:
            found.append((m.start(), name))
    return min(found)[1] if found else None


def _describe(spec: _Days) -> str:
    return f"{spec.d0} {calendar.month_name[spec.m0]} {spec.year}"


_NIGHT_HOURS = re.compile(
    r"(?<![\d:.])(?P<h>\d{1,2})(?::\d{2})?\s*(?P<ap>[ap]\.?m\.?)?(?![\d%°])", re.IGNORECASE
)


_NIGHT_CLOCKS = re.compile(
    r"(?:[\s,]*(?:between|from|to|and|until|till|[-–—]|at|\d{1,2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?"
    r"|midnight|noon)(?![\w:]))+",
    re.IGNORECASE,
)


def _night_day(after: str) -> str | None:
    """'last night between 22:00 and 23:00' is yesterday's evening, 'last night between 1 and 3'
    this morning's small hours: with the clock hours that follow all on one side of midnight,
    the day they fall on; else None (where the night starts is not guessed)."""
    hours = []
    clock = _NIGHT_CLOCKS.match(after)  # only the clock that follows, not 'gpu1' or 'node 3'
    for h in _NIGHT_HOURS.finditer(clock.group() if clock else ""):
        hour, ap = int(h["h"]), (h["ap"] or "").lower()[:1]
        if ap:
            hour = hour % 12 + (12 if ap == "p" else 0)
        hours.append(hour)
    if hours and all(18 <= h <= 24 for h in hours):
        return "yesterday"
    # 'last night from 11pm till 3am': a range across midnight starts on yesterday's evening
    if len(hours) > 1 and hours[0] >= 18 and all(h >= 18 or h <= 6 for h in hours):
        return "yesterday"
    if hours and all(0 <= h <= 6 for h in hours):
        return "today"
    return None


def _distinct(windows: list[ParsedWindow]) -> list[ParsedWindow]:
    """'the last half hour of june 1 (23:30 to midnight)': a window said twice is one window."""
    seen: set[tuple[datetime, datetime, bool]] = set()
    out = []
    for w in windows:
        if (w.start, w.end, w.instant) not in seen:
            seen.add((w.start, w.end, w.instant))
            out.append(w)
    return out


def parse_time(text: str, *, as_of: datetime) -> TimeParse:
    """Parse the time windows of ``text`` relative to ``as_of`` (a naive ``as_of`` is UTC)."""
    as_of = (as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)).astimezone(UTC)
    text = _unbracket(text)
    atoms = _lex(text)
    spans = tuple((a.start, a.end) for a in atoms)
    bad = [a for a in atoms if a.kind == "bad"]
    if bad:
        return TimeParse((), "unparseable", bad[0].message, spans=spans)
    items = _merge(text, atoms)
    if not any(a.kind not in ("noop",) for a in items):
        return TimeParse(
            (), "missing", "the question names no time window; give one, e.g. "
            "'on 1 June 2022 from 08:00 to 09:00' or 'last 10 hours'", spans=spans,
        )  # fmt: skip
    years = tuple((a.start, a.days[0].year) for a in atoms if a.days and a.days[0].year)
    ctx = _Ctx(text, as_of, years, 0, _granularity(text))
    try:
        first = _distinct(_compose(ctx, items))
        split = [a for a in atoms if len(a.days) > 1]
        if not split:
            return TimeParse(tuple(first), "ok", spans=spans)
        second = _compose(replace(ctx, choice=1), items)
    except _UnparseableError as err:
        return TimeParse((), "unparseable", str(err), spans=spans)
    except _AmbiguousError as err:
        return TimeParse((), "ambiguous", str(err), err.candidates, spans=spans)
    a = split[0]
    message = (
        f"{text[a.core : a.end]!r} reads day-first as {_describe(a.days[0])} or month-first as "
        f"{_describe(a.days[1])}; write the month as a word, e.g. '1 June 2022'"
    )
    same = tuple(w for w in first if w in second)
    candidates = tuple(w for w in first if w not in second) + tuple(
        w for w in second if w not in first
    )
    return TimeParse(same, "ambiguous", message, candidates, spans=spans)
