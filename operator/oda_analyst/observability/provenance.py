"""The provenance record of an answer: where every figure came from, so it can be replayed.

A record lists, per result: the lake partitions read (each a ``year_month=…/plugin=…/metric=…``
folder) with a fingerprint of their files (path, size and modification stamp or ETag of each),
the named graph the query ran on, the validated SPARQL, the plan it was compiled from, and the
figures themselves (inline rows, and a digest of every row); then the model calls made, if any,
and — added by the coordinator with ``add_code`` — the code run on the results, with its hash.

Pure data: the retriever builds it (it knows the lake), the coordinator extends it (it knows
the code), ``oda-analyst replay`` compares it with a re-run. No I/O here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

VERSION = 1
_Frozen = ConfigDict(frozen=True, extra="forbid")


class FileRead(BaseModel):
    """One Parquet file of a partition, as the lake listed it."""

    model_config = _Frozen

    name: str
    size: int = Field(ge=0)
    stamp: str = ""


class PartitionRead(BaseModel):
    """One lake partition a result read, and the fingerprint of its files."""

    model_config = _Frozen

    partition: str  # year_month=22-06/plugin=ipmi_pub/metric=total_power
    fingerprint: str
    files: tuple[FileRead, ...] = ()


class ResultRecord(BaseModel):
    """One result of the answer (one plan, or the model's SPARQL)."""

    model_config = _Frozen

    index: int = Field(ge=0)
    named_graph: str | None = None
    cache_key: str | None = None
    sparql: str
    plan: JsonValue = None  # None: the model wrote the SPARQL
    request: JsonValue = None  # the graph's grounded request, when there is no plan
    instant: str | None = None
    lake_fingerprint: str = ""
    partitions: tuple[PartitionRead, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[JsonValue, ...], ...] | None = None  # None: beyond the row limit
    row_count: int = Field(default=0, ge=0)
    digest: str = ""  # figures_digest of every row (inline rows or the CSV's)
    csv: str | None = None
    no_data: str | None = None


class ModelCall(BaseModel):
    """The model calls of one stage."""

    model_config = _Frozen

    stage: str
    model: str | None = None
    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0


class CodeRun(BaseModel):
    """Code run on the results (by the coordinator, in the code agent's sandbox)."""

    model_config = _Frozen

    sha256: str
    code: str
    language: str = "python"
    backend: str | None = None
    status: str | None = None
    inputs: dict[str, str] = Field(default_factory=dict)  # file name in /in -> sha256
    outputs: dict[str, str] = Field(default_factory=dict)  # file name in /out -> sha256
    at: datetime


class ProvenanceRecord(BaseModel):
    """Everything an answer's figures depend on."""

    model_config = _Frozen

    version: int = VERSION
    request_id: str
    question: str
    user: str
    as_of: datetime
    recorded_at: datetime
    lake: str
    results: tuple[ResultRecord, ...] = ()
    model_calls: tuple[ModelCall, ...] = ()
    code: tuple[CodeRun, ...] = ()
    trace_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add_code(
    record: ProvenanceRecord,
    code: str,
    *,
    backend: str | None = None,
    status: str | None = None,
    inputs: Mapping[str, bytes] | None = None,
    outputs: Mapping[str, bytes] | None = None,
    at: datetime | None = None,
) -> ProvenanceRecord:
    """The record with one more code run: the code, its sha256, where and how it ran, and the
    sha256 of the files it read and wrote (so a replay can tell a changed plot)."""
    run = CodeRun(
        sha256=sha256_text(code),
        code=code,
        backend=backend,
        status=status,
        inputs={k: hashlib.sha256(v).hexdigest() for k, v in (inputs or {}).items()},
        outputs={k: hashlib.sha256(v).hexdigest() for k, v in (outputs or {}).items()},
        at=at or datetime.now(UTC),
    )
    return record.model_copy(update={"code": (*record.code, run)})


def model_calls(tokens: Mapping[str, Mapping[str, float]], model: str | None
                ) -> tuple[ModelCall, ...]:  # fmt: skip
    """A token ledger's snapshot (stage → totals) as model-call records."""
    return tuple(
        ModelCall(
            stage=stage, model=model, calls=int(t.get("calls", 0)),
            failed_calls=int(t.get("failed_calls", 0)),
            input_tokens=int(t.get("prompt_tokens", 0)),
            output_tokens=int(t.get("completion_tokens", 0)),
            latency_s=float(t.get("latency_s", 0.0)),
        )
        for stage, t in sorted(tokens.items())
        if t.get("calls", 0)
    )  # fmt: skip


def _canonical_cell(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return float(f"{value:.12g}")  # summation order may move the last bits, nothing more
    return value


def figures_digest(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """sha256 of the columns and rows, floats to 12 significant digits."""
    body = {"columns": list(columns), "rows": [[_canonical_cell(c) for c in r] for r in rows]}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Listed(Protocol):
    """A listed lake file (the lake's ``FileInfo``)."""

    @property
    def rel(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def stamp(self) -> str: ...


L = TypeVar("L", bound=Listed)


def partitions_of(files: Sequence[L], fingerprint: Callable[[Sequence[L]], str]
                  ) -> tuple[PartitionRead, ...]:  # fmt: skip
    """Group listed files by partition folder; ``fingerprint`` digests one partition's files
    (the lake's ``files_fingerprint``, the digest its cache keys use)."""
    groups: dict[str, list[L]] = {}
    for f in files:
        groups.setdefault(f.rel.rpartition("/")[0], []).append(f)
    out = []
    for folder, members in sorted(groups.items()):
        members.sort(key=lambda f: f.rel)
        out.append(
            PartitionRead(
                partition=folder,
                fingerprint=fingerprint(members),
                files=tuple(
                    FileRead(name=f.rel.rpartition("/")[2], size=f.size, stamp=f.stamp)
                    for f in members
                ),
            )
        )
    return tuple(out)
