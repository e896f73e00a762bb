"""What ``oda-analyst doctor`` says about the configured model server, as plain facts.

Which endpoint and model are configured, whether the server answers and serves that model, its
context window (when the server reports it), which structured-output form it takes (asked once,
with one-token requests) and how long a tiny completion takes. Nothing here raises for a broken
server: a broken server is what the report is for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from oda_analyst.config import Settings
from oda_analyst.errors import OdaError
from oda_analyst.llm.client import LLMClient
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.llm.types import MODE_LABELS


@dataclass
class ModelReport:
    """The findings; ``usable`` is the verdict."""

    configured: bool
    base_url: str | None = None
    model: str | None = None
    answers: bool = False
    served: tuple[str, ...] = ()
    context_tokens: int | None = None
    structured_mode: str | None = None
    structured_source: str = ""
    completion_s: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.configured and self.answers and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "configured": self.configured, "base_url": self.base_url, "model": self.model,
            "answers": self.answers, "served": list(self.served),
            "context_tokens": self.context_tokens, "structured_mode": self.structured_mode,
            "structured_source": self.structured_source, "completion_s": self.completion_s,
            "usable": self.usable, "problems": self.problems,
        }  # fmt: skip

    def lines(self) -> list[str]:
        if not self.configured:
            return [
                "model: none configured (ODA_LLM_BASE_URL and ODA_LLM_MODEL unset); every stage "
                "runs by the rules"
            ]
        mode = MODE_LABELS.get(self.structured_mode or "", "unknown")
        ctx = f"{self.context_tokens:,} tokens" if self.context_tokens else "not reported"
        took = f"{self.completion_s:.2f} s" if self.completion_s is not None else "n/a"
        out = [
            f"model server: {self.base_url}",
            f"model: {self.model}",
            f"answers: {'yes' if self.answers else 'no'}"
            + (f" (serves: {', '.join(self.served)})" if self.served else ""),
            f"context window: {ctx}",
            f"structured output: {mode}"
            + (f" [{self.structured_source}]" if self.structured_mode else ""),
            f"one-token completion: {took}",
        ]
        out += [f"problem: {p}" for p in self.problems]
        out.append("verdict: " + ("usable" if self.usable else "NOT usable: answers by the rules"))
        return out


def diagnose(settings: Settings, *, timeout_s: float = 30.0) -> ModelReport:
    """Check the configured model server (see the module docstring)."""
    try:
        client = LLMClient.from_settings(
            settings, retry=RetryPolicy(max_retries=0), read_timeout_s=timeout_s, down_ttl_s=0
        )
    except OdaError as err:
        return ModelReport(True, settings.llm_base_url, settings.llm_model, problems=[err.message])
    if client is None:
        return ModelReport(False)
    report = ModelReport(True, client.base_url, client.model)
    with client:
        try:
            report.served = tuple(client.models())
            report.answers = True
        except OdaError as err:
            report.problems.append(err.message)
            return report
        if client.model not in report.served:
            report.problems.append(
                f"the server does not serve {client.model!r}; set ODA_LLM_MODEL to one of: "
                f"{', '.join(report.served) or '(none)'}"
            )
            return report
        report.context_tokens = client.served_context()
        report.structured_source = (
            "asked the server" if client.configured_mode == "auto" else "configured"
        )
        try:
            report.structured_mode = client.detect_structured_mode()
            started = time.monotonic()
            client.chat([{"role": "user", "content": "Say OK."}], stage="doctor", max_tokens=1)
            report.completion_s = round(time.monotonic() - started, 3)
        except OdaError as err:
            report.problems.append(err.message)
    return report
