"""Tokens per component (coordinator / retrieval / code), read from a request's trace file.

Every model call is a ``chat <model>`` span with ``gen_ai.usage.input_tokens`` and
``output_tokens`` (``oda_analyst.observability.genai``). Which component paid for it follows
from where the span sits in the trace, not from its stage's name: a call under the retriever's
request span (``retriever.query`` / ``retriever.clarify``) or the coordinator's dispatch to a
retrieval server is retrieval, one under a code-agent span is code, and the rest — the coordinator's
own loop — is coordinator. A call whose span ended in an error is counted as a failed call
(a retry the model's client made), its tokens still billed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPONENTS = ("coordinator", "retrieval", "code")
# Span names that open a component's part of the trace (the dispatch span is the
# coordinator's call into it; the server's own spans sit beneath).
_RETRIEVAL_ROOTS = ("retriever.", "dispatch retriever.")
_CODE_ROOTS = ("codeagent", "sandbox", "dispatch codeagent.", "tool codeagent_")


@dataclass
class TraceTokens:
    """What one trace file says about its model calls."""

    tokens: dict[str, dict[str, int]] = field(
        default_factory=lambda: {c: {"input": 0, "output": 0} for c in COMPONENTS}
    )
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, 0))
    failed_calls: int = 0

    @property
    def total(self) -> int:
        return sum(v["input"] + v["output"] for v in self.tokens.values())


def _component(span: Mapping[str, Any], spans: Mapping[str, Mapping[str, Any]]) -> str:
    seen: set[str] = set()
    current: Mapping[str, Any] | None = span
    while current is not None and current["span_id"] not in seen:
        seen.add(current["span_id"])
        name = str(current.get("name") or "")
        if name.startswith(_RETRIEVAL_ROOTS):
            return "retrieval"
        if name.startswith(_CODE_ROOTS):
            return "code"
        parent = current.get("parent_span_id")
        current = spans.get(parent) if parent else None
    stage = str((span.get("attributes") or {}).get("oda.stage") or "")
    if stage.startswith("code"):
        return "code"
    # A retrieval stage's call with no retriever span above it is one the trace lost its
    # parent for (another process's part not merged): the stage still says whose it is.
    return "coordinator" if not stage or stage.startswith("coordinator") else "retrieval"


def read_trace(path: str | Path) -> TraceTokens | None:
    """The trace's tokens per component; None when there is no readable trace file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    spans = {str(s["span_id"]): s for s in data.get("spans") or [] if "span_id" in s}
    out = TraceTokens()
    for span in spans.values():
        attrs = span.get("attributes") or {}
        if "gen_ai.usage.input_tokens" not in attrs:
            continue
        comp = _component(span, spans)
        out.tokens[comp]["input"] += int(attrs.get("gen_ai.usage.input_tokens") or 0)
        out.tokens[comp]["output"] += int(attrs.get("gen_ai.usage.output_tokens") or 0)
        out.calls[comp] += 1
        if str(span.get("status") or "").lower() == "error":
            out.failed_calls += 1
    return out
