"""One model generation as a span with OpenTelemetry's ``gen_ai.*`` attributes, and its metrics.

The span is started when the request is sent and ended when the answer (or the failure) is in,
so its duration is the call's latency; LangFuse shows it as a generation with its tokens
(``gen_ai.usage.input_tokens`` / ``output_tokens``) and its input and output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from oda_analyst.observability import metrics
from oda_analyst.observability.tracing import clip, set_attributes, tracer

PROVIDER = "openai"
"""``gen_ai.provider.name``: every server we speak to (vLLM, llama.cpp) takes the OpenAI API."""


@dataclass
class Generation:
    """An open generation span; ``finish`` ends it exactly once."""

    span: Span
    model: str
    stage: str
    done: bool = False

    def finish(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        latency_s: float,
        ok: bool,
        response_model: str | None = None,
        finish_reason: str | None = None,
        output: str | None = None,
        error: str | None = None,
        error_type: str | None = None,
        attempts: int = 1,
    ) -> None:
        if self.done:
            return
        self.done = True
        set_attributes(
            self.span,
            {
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.response.model": response_model,
                "gen_ai.response.finish_reasons": [finish_reason] if finish_reason else None,
                "oda.llm.latency_s": round(latency_s, 6),
                "oda.llm.attempts": attempts,
                "langfuse.observation.output": output,
                "error.type": error_type,
            },
        )
        if not ok:
            self.span.set_status(Status(StatusCode.ERROR, clip(error or "the call failed", 500)))
        self.span.end()
        metrics.llm_call(self.stage, self.model, input_tokens=input_tokens,
                         output_tokens=output_tokens, seconds=latency_s, ok=ok)  # fmt: skip


def start_generation(
    *,
    model: str,
    stage: str,
    server: str,
    messages: Sequence[Any],
    max_tokens: int | None,
    temperature: float | None,
    structured: bool,
    tools: int = 0,
) -> Generation:
    """Open the span of one chat call to ``model`` at ``server`` for ``stage``."""
    current = tracer().start_span(f"chat {model}", kind=SpanKind.CLIENT)
    set_attributes(
        current,
        {
            "langfuse.observation.type": "generation",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": temperature,
            "server.address": server,
            "oda.stage": stage,
            "oda.llm.structured": structured,
            "oda.llm.tools": tools,
            "langfuse.observation.input": clip(json.dumps(list(messages), default=str)),
        },
    )
    return Generation(current, model, stage)
