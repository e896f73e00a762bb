"""The types a question's reading is made of that the retriever acts on: the entities it names
and its time windows. Plain data with their own checks (a window is zoned and ends after it
starts); they import nothing of the reader, so a ``Reading`` can carry them and any part can take
them without the parsers that found them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Literal, cast

from oda_analyst.errors import UsageError


@dataclass(frozen=True)
class Entities:
    """The entities a question names; empty tuples / False when it names none."""

    nodes: tuple[int, ...] = ()
    all_nodes: bool = False
    racks: tuple[int, ...] = ()
    rooms: tuple[str, ...] = ()
    system: bool = False
    jobs: tuple[int, ...] = ()
    users: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()  # Ganglia index 0..3
    cpus: tuple[int, ...] = ()  # socket 0/1
    # (kind, key): ("crac", "CDZ01"), ("plc", "Q101"), ("panel", "QGBT1/main_ict")
    devices: tuple[tuple[str, str], ...] = ()
    weather: bool = False
    warnings: tuple[str, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = [list(v) for v in value] if f.name in ("devices", "spans") else (
                list(value) if isinstance(value, tuple) else value
            )  # fmt: skip
        return out


Status = Literal["ok", "missing", "ambiguous", "unparseable"]
STATUSES: tuple[str, ...] = ("ok", "missing", "ambiguous", "unparseable")
GRANULARITIES: tuple[str, ...] = ("minute", "hour", "day", "week", "month")


@dataclass(frozen=True)
class ParsedWindow:
    """A half-open UTC window ``[start, end)`` and the phrase it came from."""

    start: datetime
    end: datetime
    text: str = ""
    granularity_hint: str | None = None
    # 'at 11:00 on 1 June': one instant, held as [t, t + 1 s); the planner widens it to the
    # metric's sampling period and the answer keeps the reading nearest t (understanding/instant.py)
    instant: bool = False

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise UsageError(
                    f"time window {name} {value!r} is not a zoned timestamp",
                    hint="use ISO-8601 with an offset, e.g. 2022-06-01T08:00:00Z",
                )
            object.__setattr__(self, name, value.astimezone(UTC))
        if self.end <= self.start:
            raise UsageError(
                f"time window {self.text or ''!r} ends ({self.end.isoformat()}) at or before it "
                f"starts ({self.start.isoformat()})",
                hint="give an end later than the start",
            )
        if self.granularity_hint is not None and self.granularity_hint not in GRANULARITIES:
            raise UsageError(
                f"unknown granularity {self.granularity_hint!r}",
                hint=f"use one of {', '.join(GRANULARITIES)}",
            )

    def to_dict(self) -> dict[str, str | bool | None]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "text": self.text,
            "granularity_hint": self.granularity_hint,
            **({"instant": True} if self.instant else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ParsedWindow:
        """Validate a JSON object (e.g. a model's output) into a window."""
        if not isinstance(data, Mapping):
            raise UsageError("a time window must be a JSON object", hint="give start and end")
        stamps = []
        for name in ("start", "end"):
            raw = data.get(name)
            try:
                stamp = datetime.fromisoformat(str(raw))
            except ValueError:
                raise UsageError(
                    f"time window {name} {raw!r} is not ISO-8601",
                    hint="use e.g. 2022-06-01T08:00:00Z",
                ) from None
            stamps.append(stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC))
        hint = data.get("granularity_hint")
        return cls(
            start=stamps[0],
            end=stamps[1],
            text=str(data.get("text") or ""),
            granularity_hint=None if hint is None else str(hint),
            instant=data.get("instant") is True,
        )


@dataclass(frozen=True)
class TimeParse:
    """The windows of a question, or why there are none (``status``/``message``)."""

    windows: tuple[ParsedWindow, ...]
    status: Status
    message: str | None = None
    candidates: tuple[ParsedWindow, ...] = ()
    # Character spans of every temporal phrase, so later stages can strip them before embedding.
    spans: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise UsageError(f"unknown time status {self.status!r}", hint=f"use {STATUSES}")
        if self.status == "ok" and not self.windows:
            raise UsageError("status 'ok' needs at least one window", hint="or say 'missing'")
        if self.status != "ok" and not self.message:
            raise UsageError(f"status {self.status!r} needs a message", hint="say what is wrong")

    def to_dict(self) -> dict[str, object]:
        return {
            "windows": [w.to_dict() for w in self.windows],
            "status": self.status,
            "message": self.message,
            "candidates": [w.to_dict() for w in self.candidates],
            "spans": [list(s) for s in self.spans],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> TimeParse:
        """Validate a JSON object (e.g. a model's output) into a parse result."""

        def windows(key: str) -> tuple[ParsedWindow, ...]:
            raw = data.get(key) or []
            if not isinstance(raw, list):
                raise UsageError(f"{key} must be a list", hint="give a JSON array of windows")
            return tuple(ParsedWindow.from_dict(cast(Mapping[str, object], w)) for w in raw)

        status = str(data.get("status", "ok"))
        if status not in STATUSES:
            raise UsageError(f"unknown time status {status!r}", hint=f"use one of {STATUSES}")
        message = data.get("message")
        raw_spans = data.get("spans") or []
        spans = tuple((int(s[0]), int(s[1])) for s in cast(list[list[int]], raw_spans))
        return cls(
            windows=windows("windows"),
            status=cast(Status, status),
            message=None if message is None else str(message),
            candidates=windows("candidates"),
            spans=spans,
        )


@dataclass(frozen=True)
class Phrase:
    """One metric phrase and the character region of its conjunction group in the question."""

    text: str  # lower-case, one space between words; device words first when attached
    start: int  # the phrase's own run
    end: int
    group_start: int  # the whole conjunction group it belongs to
    group_end: int


@dataclass(frozen=True)
class Chunking:
    """What the rules found in a question."""

    question: str
    core_end: int  # where the analysis tail starts (len(question) when there is none)
    phrases: tuple[Phrase, ...]
    non_metric_parts: tuple[str, ...] = ()
    entity_refs: tuple[str, ...] = ()  # job/node selections the rules recognise
    unresolved_entities: tuple[str, ...] = ()  # 'big nodes': looks like an entity, is none


IntentKind = Literal["metric", "non_metric"]
Cardinality = Literal["single", "multi"]
NonMetricKind = Literal["count_entities", "list_entities", "list_jobs", "job_stats"]
INTENT_KINDS: tuple[str, ...] = ("metric", "non_metric")
NON_METRIC_KINDS: tuple[str, ...] = ("count_entities", "list_entities", "list_jobs", "job_stats")


@dataclass(frozen=True)
class Intent:
    """I(q) → (i, c, p), plus the non-metric route and why."""

    kind: IntentKind
    cardinality: Cardinality
    confidence: float
    sub_kind: NonMetricKind | None = None
    reason: str = ""


@dataclass(frozen=True)
class SubQuery:
    """A context-preserving sub-query and the bare metric phrase to ground."""

    text: str
    phrase: str


@dataclass(frozen=True)
class Level:
    """Which statistic of each entity's readings a threshold applies to.

    'nodes whose average power was above 1000 W' -> avg; 'nodes that peaked above 300 W' -> max;
    'stayed below 500 W the whole hour' -> every reading (``every``); 'nodes with power above
    1000 W, and the max of each' -> neither (some reading crossed it; the max is asked apart).
    """

    fn: str | None = None
    every: bool = False


NO_LEVEL = Level()


@dataclass(frozen=True)
class FormCues:
    """The form cues of one question."""

    lists_nodes: bool = False
    asks_rack: bool = False
    asks_users: bool = False
    counts: str | None = None  # what "how many" counts: user, rack, node, job
    how_many: bool = False  # 'how many …' at all
    readings_named: bool = False  # 'how many readings/samples/times …'
    asks_state: bool = False  # 'what state did job J finish in'
    job_fields: tuple[str, ...] = ()  # job attributes asked ('who ran job J': user)
    job_event: str | None = None  # 'started' / 'ended': the window selects that event
    running_named: bool = False  # 'running', 'ran': the window selects the jobs running in it
    names_nodes: bool = False  # 'node', 'nodes', 'hosts' anywhere ('node list of job J')
    count_named: bool = False  # 'count', 'number', 'total' anywhere: a count is asked
    hours: bool = False  # 'how many hours …' / 'number of hours …': the time a level held
    asks_duration: bool = False  # 'how long did job J run', 'duration of job J'
    level: Level = NO_LEVEL  # which statistic of each entity a threshold is on (cues)
