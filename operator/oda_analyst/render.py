"""Plain-text rendering of an answer for the terminal (the JSON form is the contract)."""

from __future__ import annotations

import re
from typing import Any

_MAX_ROWS = 20
_ACRONYMS = re.compile(r"\b(cpu|gpu|pcie|dimm|psu|ipmi|pue|ict|crac)\b", re.IGNORECASE)
# 'it' is a word too: an acronym only before what IT draws ('Average it power' was a title).
_IT = re.compile(r"\bit (?=(?:power|load|energy|consumption)\b)", re.IGNORECASE)


def acronyms(text: str) -> str:
    """Hardware and facility acronyms in their capitals ('gpu 0 utilisation' -> 'GPU 0
    utilisation', 'it power' -> 'IT power', 'pcie' -> 'PCIe'), for titles and sentences."""
    text = _ACRONYMS.sub(lambda m: "PCIe" if m[1].lower() == "pcie" else m[1].upper(), text)
    return _IT.sub("IT ", text)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def table(columns: list[str], rows: list[list[Any]], limit: int = _MAX_ROWS) -> str:
    """A fixed-width table of at most ``limit`` rows."""
    shown = [[_cell(v) for v in row] for row in rows[:limit]]
    widths = [max([len(c), *(len(r[i]) for r in shown)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in shown]
    if len(rows) > limit:
        lines.append(f"… {len(rows) - limit:,} more rows")
    return "\n".join(lines)


def render_answer(payload: Any) -> str:
    """Status, answer text, tables (or CSV paths), clarification choices and the SPARQL."""
    out = [f"understood as: {payload.understood_as}"] if payload.understood_as else []
    out.append(f"[{payload.status}] {payload.answer}")
    if payload.clarification is not None:
        for i, cand in enumerate(payload.clarification.candidates, 1):
            label = cand.get("metric") or cand.get("text") or cand.get("start")
            desc = cand.get("description", "")
            out.append(f"  {i}. {label}  {desc}".rstrip())
        out.append(f'answer with: oda-analyst clarify {payload.request_id} "<your answer>"')
    for res in payload.results:
        out.append("")
        out.append(res["explanation"])
        if res["rows"] is not None:
            out.append(table(res["columns"], res["rows"]))
        else:
            out.append(
                f"{res['row_count']:,} rows in {res['csv']} (handle {res['csv_handle']});"
                " first rows:"
            )
            out.append(table(res["columns"], res["preview"]))
        if res.get("sparql"):  # a baseline's lake query has none
            out.append("SPARQL (validated):")
            out.append(res["sparql"])
    for warning in payload.warnings:
        out.append(f"note: {warning}")
    out.append(f"request id: {payload.request_id}")
    trace = getattr(payload, "trace", None)
    if trace:
        out.append(f"trace: {trace}")
    return "\n".join(out)


def render_analysis(answer: Any) -> str:
    """The coordinator's answer: the retrieval as above, then tasks, charts and the summary."""
    out = [f"understood as: {answer.understood_as}"] if answer.understood_as else []
    clar = answer.clarification
    if clar is not None:
        out.append(f"[clarification] {clar.get('question', '')}")
        for i, cand in enumerate(clar.get("candidates") or [], 1):
            label = cand.get("metric") or cand.get("text") or cand.get("start")
            desc = cand.get("description", "")
            out.append(f"  {i}. {label}  {desc}".rstrip())
        out.append(f'answer with: oda-analyst clarify {answer.request_id} "<your answer>"')
        return "\n".join(out)
    for res in answer.results:
        out.append("")
        out.append(res["explanation"])
        if res["rows"] is not None:
            out.append(table(res["columns"], res["rows"], limit=10))
        else:
            out.append(f"{res['row_count']:,} rows in {res['csv']}; first rows:")
            out.append(table(res["columns"], res["preview"][:5], limit=5))
    if answer.tasks:
        out.append("")
        out.append("tasks:")
        out += [f"  [{t['status']}] {t['name']}" for t in answer.tasks]
    for art in answer.artifacts:
        kind = "chart" if art.media_type.startswith("image/") else "file"  # a CSV is no chart
        out.append(f"{kind}: {art.path}  ({art.title.replace(chr(10), ' ')})")
    out.append("")
    out.append(f"[{answer.status}] {answer.summary}")
    for warning in answer.warnings:
        out.append(f"note: {warning}")
    out.append(f"request id: {answer.request_id}")
    if getattr(answer, "trace", None):
        out.append(f"trace: {answer.trace}")
    return "\n".join(out)
