"""Time-window extraction by a model, reconciled with the deterministic parser (Stage 1).

The paper makes time extraction "a single-step LLM task leveraging few-shot in-context
learning"; here the model's answer is structured (JSON Schema), validated into the parser's own
``TimeParse`` type, and never trusted alone. ``reconcile_time`` decides, as a pure function:

- the parser succeeded (status ok) and the model read the same window: the parser's;
- both read one window, and they differ: neither is picked, the user is asked which one was
  meant (an ``ambiguous`` parse, the rules' reading first, then the model's), so a capable model
  widens what is understood while a weak one can only make the analyst ask; where either read
  several windows, the parser's are kept, with a note;
- the parser found nothing or could not read the phrase (missing / unparseable) and the model
  gave windows: only those whose ``text`` is a phrase of the question, and not one naming an
  entity ("job 1036308"), are kept (any other window is a hallucination and is dropped,
  noted), and they are not used
  unchecked: nothing symbolic can confirm them, so the user is asked to confirm the model's
  reading (an ``ambiguous`` parse whose candidates are the model's windows). This is where the
  model adds flexibility ("the fortnight before last") without ever answering on its guess;
- the parser found a genuine ambiguity (1/6/2022): it stays ambiguous, so the user is asked;
  the model's reading, when it is one of the candidates, is put first;
- the model failed (unreachable, not JSON, schema or window errors): the parser's result,
  with a note. No exception leaves ``model_time`` for a model failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from oda_analyst.errors import UsageError
from oda_analyst.llm import LLMClient, LLMError, TokenLedger
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.timeparse import parse_time
from oda_analyst.reading.types import STATUSES, ParsedWindow, TimeParse
from oda_analyst.retriever.model_paths.budgets import max_tokens
from oda_analyst.retriever.model_paths.prompts import time_messages

STAGE = "time"

TIME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "windows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "start": {
                        "type": "string",
                        "description": "ISO-8601, e.g. 2022-06-01T08:00:00Z",
                        "maxLength": 32,
                    },
                    "end": {
                        "type": "string",
                        "description": "ISO-8601, exclusive",
                        "maxLength": 32,
                    },
                    "text": {
                        "type": "string",
                        "description": "the phrase, copied",
                        "maxLength": 80,
                    },
                },
                "required": ["start", "end", "text"],
                "additionalProperties": False,
            },
            "maxItems": 4,
        },
        "status": {"type": "string", "enum": list(STATUSES)},
        "message": {"type": ["string", "null"], "maxLength": 160},
    },
    "required": ["windows", "status", "message"],
    "additionalProperties": False,
}

Source = Literal["parser", "model", "both"]


@dataclass(frozen=True)
class TimeDecision:
    """The parse the pipeline uses, where it came from, and why (``notes``)."""

    parse: TimeParse
    source: Source
    notes: tuple[str, ...] = ()
    model_parse: TimeParse | None = None


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _span_of(question: str, phrase: str) -> tuple[int, int] | None:
    """Where ``phrase`` occurs in ``question`` (case- and whitespace-insensitive), if it does."""
    words = phrase.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    found = re.search(pattern, question, flags=re.IGNORECASE)
    return (found.start(), found.end()) if found else None


def _bounds(windows: tuple[ParsedWindow, ...]) -> list[tuple[datetime, datetime]]:
    return [(w.start, w.end) for w in windows]


def _show(windows: tuple[ParsedWindow, ...]) -> str:
    return ", ".join(f"[{w.start.isoformat()}, {w.end.isoformat()})" for w in windows) or "none"


def reconcile_time(
    question: str, parser: TimeParse, model: TimeParse | None, model_error: str | None = None
) -> TimeDecision:
    """Choose between the parser's and the model's reading (see the module docstring)."""
    if model is None:
        why = model_error or "no answer"
        return TimeDecision(
            parser,
            "parser",
            (f"model time extraction failed ({why}); used the deterministic parser",),
        )
    if parser.status == "ok":
        if model.status == "ok" and _bounds(model.windows) == _bounds(parser.windows):
            return TimeDecision(parser, "both", (), model)
        if model.status == "ok" and len(parser.windows) == len(model.windows) == 1:
            return _ask_which(parser, model)
        note = (
            f"model and parser disagree on the time window (model: {model.status}, "
            f"{_show(model.windows)}; parser: {_show(parser.windows)}); kept the parser's"
        )
        return TimeDecision(parser, "parser", (note,), model)
    if parser.status == "ambiguous":
        return _keep_ambiguous(parser, model)
    if model.status != "ok":
        note = f"neither the parser ({parser.status}) nor the model ({model.status}) found a window"
        return TimeDecision(parser, "parser", (note,), model)
    return _adopt_model(question, parser, model)


def _ask_which(parser: TimeParse, model: TimeParse) -> TimeDecision:
    """The rules and the model each read one window, and not the same: ask which was meant."""
    (ours,), (theirs,) = parser.windows, model.windows
    message = (
        f"I read the time as {_show((ours,))} and a language model read it as {_show((theirs,))}."
    )
    note = f"model and parser disagree on the time window; the user is asked ({message})"
    asked = replace(parser, windows=(), status="ambiguous", message=message,
                    candidates=(ours, replace(theirs, text=theirs.text or ours.text)))  # fmt: skip
    return TimeDecision(asked, "both", (note,), model)


def _keep_ambiguous(parser: TimeParse, model: TimeParse) -> TimeDecision:
    chosen = _bounds(model.windows) if model.status == "ok" else []
    first = [c for c in parser.candidates if (c.start, c.end) in chosen]
    if not first:
        note = "the parser found the date ambiguous; the user is asked (the model's reading "
        note += f"{_show(model.windows)} is not one of the candidates)"
        return TimeDecision(parser, "parser", (note,), model)
    rest = [c for c in parser.candidates if c not in first]
    ordered = replace(parser, candidates=tuple(first + rest))
    note = "the parser found the date ambiguous; the user is asked, the model's reading first"
    return TimeDecision(ordered, "parser", (note,), model)


def _adopt_model(question: str, parser: TimeParse, model: TimeParse) -> TimeDecision:
    kept: list[ParsedWindow] = []
    spans: list[tuple[int, int]] = []
    notes: list[str] = []
    named = extract_entities(question).spans
    for window in model.windows:
        span = _span_of(question, window.text)
        if span is None:
            notes.append(
                f"dropped the model's window {_show((window,))}: its phrase {window.text!r} is "
                "not in the question"
            )
            continue
        if any(span[0] < end and start < span[1] for start, end in named):
            notes.append(
                f"dropped the model's window {_show((window,))}: its phrase {window.text!r} "
                "names a node, rack, job or user, not a time"
            )
            continue
        kept.append(window)
        spans.append(span)
    if not kept:
        return TimeDecision(parser, "parser", tuple(notes), model)
    phrases = ", ".join(repr(w.text) for w in kept)
    confirm = TimeParse(
        windows=(),
        status="ambiguous",
        message=f"I could not read the time {phrases} myself; a language model read it as "
        f"{_show(tuple(kept))} (UTC).",
        candidates=tuple(kept),
        spans=tuple(sorted(set(spans))),
    )
    notes.insert(
        0,
        f"the parser found {parser.status}; the model's window(s) {_show(tuple(kept))} are "
        "offered for confirmation, not used unchecked",
    )
    return TimeDecision(confirm, "model", tuple(notes), model)


def ask_model_time(
    client: LLMClient, question: str, as_of: datetime, *, ledger: TokenLedger | None = None
) -> TimeParse:
    """The model's reading, validated into a ``TimeParse``; raises LLMError or UsageError."""
    data, _ = client.structured(
        time_messages(question, as_of),
        TIME_SCHEMA,
        stage=STAGE,
        schema_name="time_window",
        ledger=ledger,
        max_tokens=max_tokens(STAGE),
    )
    return TimeParse.from_dict(data)


def decide_time(
    client: LLMClient | None,
    question: str,
    as_of: datetime,
    *,
    ledger: TokenLedger | None = None,
    when_parsed: bool = True,
) -> TimeDecision:
    """The parser always runs; the model too when there is a client; then ``reconcile_time``.

    ``when_parsed=False`` skips the model when the parser read the window (status ok): its
    reading would be kept whatever the model says, so the call (the largest prompt of a
    request, ~1,700 tokens) would buy nothing but a note."""
    parser = parse_time(question, as_of=as_of)
    if client is None or (parser.status == "ok" and not when_parsed):
        return TimeDecision(parser, "parser")
    try:
        model = ask_model_time(client, question, as_of, ledger=ledger)
    except (LLMError, UsageError) as exc:
        return reconcile_time(question, parser, None, f"{type(exc).__name__}: {exc.message}")
    return reconcile_time(question, parser, model)


def model_time(
    client: LLMClient | None,
    question: str,
    as_of: datetime,
    *,
    ledger: TokenLedger | None = None,
) -> TimeParse:
    """The time parse Stage 1 uses (``decide_time(...).parse``)."""
    return decide_time(client, question, as_of, ledger=ledger).parse
