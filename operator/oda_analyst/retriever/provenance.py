"""The provenance record of a completed retrieval, built from its runs (``stages``).

Each run carries the lake files it read (``PlanRun.files``, the very listing its cache key was
computed from), so the partitions and fingerprints recorded are those the figures came from —
not a second listing taken later. The record is stored with the request's checkpoint
(``Artifacts.extra["provenance"]``) and returned in the answer (``provenance``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from oda_analyst.errors import StoreError, UsageError
from oda_analyst.lake.reader import files_fingerprint
from oda_analyst.observability.provenance import (
    ProvenanceRecord,
    ResultRecord,
    figures_digest,
    model_calls,
    partitions_of,
)
from oda_analyst.retriever.stages.stage3 import PlanRun
from oda_analyst.retriever.state import RequestState

EXTRA_KEY = "provenance"
MAX_RECORDED_ROWS = 1000
"""Inline rows kept in the record (so a checkpoint stays small with a large ODA_ROW_LIMIT);
beyond it the record keeps the digest, and replay says the figures changed without the cells."""


def result_digest(columns: Sequence[str], rows: Sequence[Sequence[Any]] | None,
                  csv: str | None) -> str:  # fmt: skip
    """The digest of every figure of a result: its inline rows, or its CSV file's bytes."""
    if rows is not None:
        return figures_digest(columns, rows)
    if csv is None:
        return ""
    try:
        return "csv:" + hashlib.sha256(Path(csv).read_bytes()).hexdigest()
    except OSError:
        return ""


def result_record(index: int, run: PlanRun, result: Mapping[str, Any]) -> ResultRecord:
    """What one run's figures depend on, and the figures."""
    rows = result.get("rows")
    columns = tuple(result.get("columns") or ())
    return ResultRecord(
        index=index,
        named_graph=None if run.vkg is None else run.vkg.graph,
        cache_key=None if run.vkg is None else run.vkg.key,
        sparql=run.compiled.sparql,
        plan=result.get("plan"),
        request=None if run.request is None else run.request.model_dump(mode="json"),
        instant=result.get("instant"),
        lake_fingerprint=files_fingerprint(run.files),
        partitions=partitions_of(run.files, files_fingerprint),
        columns=columns,
        rows=None if rows is None or len(rows) > MAX_RECORDED_ROWS else tuple(map(tuple, rows)),
        row_count=int(result.get("row_count") or 0),
        digest=result_digest(columns, rows, result.get("csv")),
        csv=result.get("csv"),
        no_data=result.get("no_data"),
    )


def capture(
    state: RequestState,
    runs: Sequence[PlanRun],
    results: Sequence[Mapping[str, Any]],
    *,
    lake: str,
    tokens: Mapping[str, Mapping[str, float]],
    model: str | None,
    trace_id: str | None,
) -> ProvenanceRecord:
    """The record of a request that completed with ``runs`` (answered as ``results``)."""
    return ProvenanceRecord(
        request_id=state.request_id,
        question=state.question,
        user=state.user,
        as_of=state.as_of,
        recorded_at=datetime.now(UTC),
        lake=lake,
        results=tuple(
            result_record(i, r, res) for i, (r, res) in enumerate(zip(runs, results, strict=True))
        ),
        model_calls=model_calls(tokens, model),
        trace_id=trace_id,
    )


def stored_record(state: RequestState) -> ProvenanceRecord:
    """The record stored with a request; UsageError when it has none."""
    raw = state.artifacts.extra.get(EXTRA_KEY)
    if raw is None:
        raise UsageError(
            f"request {state.request_id} has no provenance record (it is {state.status}: only "
            "completed answers have figures to replay)",
            hint="replay a request that completed; `oda-analyst ask … --json` gives its id",
        )
    try:
        return ProvenanceRecord.model_validate(raw)
    except ValidationError as exc:
        raise StoreError(
            f"the provenance record of request {state.request_id} is not readable: "
            f"{exc.errors()[0]['msg']}",
            hint="it was written by another version of oda-analyst; ask the question again",
        ) from None
