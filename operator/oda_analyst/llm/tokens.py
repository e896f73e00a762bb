"""Per-stage token accounting for one request (the CLI's ``tokens`` field).

Stages may call the model from several threads (tool calls run in a pool), so the ledger locks.
Counts are the server's own ``usage`` numbers; nothing here estimates tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass

StageTotals = dict[str, int | float]


@dataclass
class _Totals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0
    failed_calls: int = 0
    unreported_calls: int = 0
    """Calls whose server sent no ``usage`` (counted as zero tokens, never estimated)."""
    retries: int = 0
    latency_s: float = 0.0

    def add(self, other: _Totals) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.calls += other.calls
        self.failed_calls += other.failed_calls
        self.unreported_calls += other.unreported_calls
        self.retries += other.retries
        self.latency_s += other.latency_s


_FIELDS = tuple(_Totals.__dataclass_fields__)


class TokenLedger:
    """Thread-safe running totals per stage: tokens, calls, failures, retries and latency."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[str, _Totals] = {}

    def record(
        self,
        stage: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        total_tokens: int | None = None,
        retries: int = 0,
        latency_s: float = 0.0,
        failed: bool = False,
        unreported: bool = False,
    ) -> None:
        """Add one model call (successful or not) to ``stage``."""
        entry = _Totals(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=(
                prompt_tokens + completion_tokens if total_tokens is None else total_tokens
            ),
            calls=1,
            failed_calls=1 if failed else 0,
            unreported_calls=1 if unreported else 0,
            retries=retries,
            latency_s=latency_s,
        )
        with self._lock:
            self._stages.setdefault(stage, _Totals()).add(entry)

    def snapshot(self) -> dict[str, StageTotals]:
        """A copy of the totals, stage → field → value, safe to serialise as JSON."""
        with self._lock:
            return {stage: _as_dict(totals) for stage, totals in sorted(self._stages.items())}

    def total(self) -> StageTotals:
        """All stages summed."""
        summed = _Totals()
        with self._lock:
            for totals in self._stages.values():
                summed.add(totals)
        return _as_dict(summed)

    def merge(self, other: TokenLedger | Mapping[str, Mapping[str, int | float]]) -> None:
        """Add another ledger (or a snapshot of one, e.g. from a sub-agent) into this one."""
        incoming = other.snapshot() if isinstance(other, TokenLedger) else other
        parsed = {stage: _from_mapping(values) for stage, values in incoming.items()}
        with self._lock:
            for stage, totals in parsed.items():
                self._stages.setdefault(stage, _Totals()).add(totals)

    def reset(self) -> None:
        with self._lock:
            self._stages.clear()


def _as_dict(totals: _Totals) -> StageTotals:
    out: StageTotals = dict(asdict(totals))
    out["latency_s"] = round(totals.latency_s, 6)
    return out


def _from_mapping(values: Mapping[str, int | float]) -> _Totals:
    unknown = set(values) - set(_FIELDS)
    if unknown:
        raise ValueError(f"unknown token-ledger fields: {sorted(unknown)}")
    return _Totals(
        prompt_tokens=int(values.get("prompt_tokens", 0)),
        completion_tokens=int(values.get("completion_tokens", 0)),
        total_tokens=int(values.get("total_tokens", 0)),
        calls=int(values.get("calls", 0)),
        failed_calls=int(values.get("failed_calls", 0)),
        unreported_calls=int(values.get("unreported_calls", 0)),
        retries=int(values.get("retries", 0)),
        latency_s=float(values.get("latency_s", 0.0)),
    )
