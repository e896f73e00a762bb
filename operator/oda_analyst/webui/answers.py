"""The coordinator's answer as the UI stores and shows it (pure).

Rows are kept up to ``MAX_ROWS`` for the paginated table; the full result stays downloadable as
the CSV artefact the coordinator wrote. Artefact paths are replaced by their index, so the page
only ever links ``/artifacts/<message>/<index>``, which checks the owner.
"""

from __future__ import annotations

import re
from typing import Any

MAX_ROWS = 2000
# "(written to /srv/…/r.csv)", "(/srv/…/chart1-line.png)": where the server keeps a file is not
# the user's business (and not a link they could open); the page links each file itself.
_PATH_NOTE = re.compile(r" ?\((?:written to )?/[^()\s]+\)")
_NUMBERED = re.compile(r"\s1\.\s")
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_PATH = re.compile(r"/(?:[^/\s]+/)+([^/\s]+)")
# "(the lake holds months 22-05..22-06: `oda-analyst lake describe`)", "…; `oda-analyst metrics`
# lists them": a command line is no help on a web page (the page shows the lake's range itself).
_COMMAND = re.compile(r"(?:[:;,]\s*)?`oda-analyst [^`]*`(?:\s+(?:shows|lists)\b[^;.)]*)?")


def without_paths(text: str) -> str:
    """``text`` with server file paths dropped (in parentheses) or cut to their file name."""
    return _PATH.sub(r"\1", _PATH_NOTE.sub("", text))


def without_commands(text: str) -> str:
    """``text`` without the ``oda-analyst …`` command lines the CLI's messages point to."""
    return _COMMAND.sub("", text)


def candidate_answer(candidate: Any) -> tuple[str, str]:
    """(label shown on the button, text sent back as the answer) of one clarification candidate.

    The retriever's metric candidates are ``{"metric", "plugin", "description", …}``; the
    metric's name is what its ``clarify`` takes."""
    if isinstance(candidate, dict):
        value = next(
            (
                str(candidate[k])
                for k in ("value", "metric", "name", "id", "label")
                if candidate.get(k)
            ),
            "",
        )
        label = str(candidate.get("label") or value)
        if candidate.get("plugin"):
            label = f"{label} [{candidate['plugin']}]"
        detail = candidate.get("description")
        return (f"{label} — {detail}" if detail else label), value
    return str(candidate), str(candidate)


def trace_id(trace_file: object) -> str | None:
    """The trace id of a request, from its trace file's name (``<32 hex>.json``)."""
    stem = str(trace_file or "").rsplit("/", 1)[-1].removesuffix(".json")
    return stem if _TRACE_ID.match(stem) else None


def brief(summary: str, understood_as: str | None, chart_titles: list[str]) -> str:
    """The summary as the page shows it, under the understood-as line and above the charts:
    without the sentence the understood-as line already says, nor a "Chart: <title>." the
    chart's own title says ("…: 2,520 rows. Chart: …" reads "2,520 rows.")."""
    text = summary.strip()
    said = (understood_as or "").strip().rstrip(".")
    if said and text.startswith(said + ":"):
        rest = text[len(said) + 1 :].strip()
        text = rest[:1].upper() + rest[1:] if rest else text
    for title in chart_titles:
        for form in (f"Chart: {title.rstrip('.')}.", f"Chart: {title}"):
            text = text.replace(form, "")
    text = " ".join(text.split()) or summary
    # The retriever's questions start in lower case ("which metric do you mean…"): a sentence.
    return text[:1].upper() + text[1:]


def view(answer: dict[str, Any]) -> dict[str, Any]:
    """The fields of a coordinator answer the page renders."""
    rows = answer.get("rows") or []
    clar = answer.get("clarification") or None
    summary = without_commands(
        without_paths(str(answer.get("answer") or answer.get("summary") or ""))
    )
    if clar is not None:
        clar = {
            "field": clar.get("field"),
            "question": clar.get("question", ""),
            "candidates": [candidate_answer(c) for c in clar.get("candidates") or []],
        }
        if clar["candidates"]:
            # The question lists its candidates ("… 1. ambient [ipmi] …; 2. …"): the buttons
            # say the same, so the text keeps the question alone.
            summary = _NUMBERED.split(summary, maxsplit=1)[0].strip()
    charts = [
        str(a.get("title") or "")
        for a in answer.get("artifacts") or []
        if str(a.get("media_type") or "").startswith("image/")
    ]
    return {
        "status": answer.get("status"),
        "brief": brief(summary, answer.get("understood_as"), [t for t in charts if t]),
        "request_id": answer.get("request_id"),
        "trace_id": trace_id(answer.get("trace")),
        "retrieval_request_id": answer.get("retrieval_request_id"),
        "summary": summary,
        "understood_as": answer.get("understood_as"),
        "columns": answer.get("columns") or [],
        "rows": rows[:MAX_ROWS],
        "row_count": answer.get("row_count"),
        "rows_cut": len(rows) > MAX_ROWS,
        "sparql": answer.get("sparql"),
        "plan": answer.get("plan"),
        "clarification": clar,
        "error": answer.get("error"),
        "warnings": [without_commands(str(w)) for w in answer.get("warnings") or []],
        "tasks": answer.get("tasks") or [],
        "artifacts": [
            {"index": i, "media_type": a.get("media_type"), "title": a.get("title", "")}
            for i, a in enumerate(answer.get("artifacts") or [])
        ],
        "artifact_paths": [a.get("path") for a in answer.get("artifacts") or []],
    }


def public(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored payload without the server-side file paths."""
    return {k: v for k, v in payload.items() if k != "artifact_paths"}
