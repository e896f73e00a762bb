"""The pipeline the operator drives, as a small Protocol.

The operator never reaches the lake, the graphs or SPARQL itself: it asks this port to
understand a question (stage 1: a plan, a clarification or a refusal, and which graphs the plans
need), to answer it (with the clarification answers replayed: the coordinator when the query asks
for analysis, which runs the retriever and the code agent through their MCP tools; the retriever
alone when it does not; or one of the paper's baselines), whether a query's own model endpoint
answers, and about the graphs' cache entries. ``pipeline_local.LocalPipeline`` implements it
in the operator's process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class GraphNeed:
    """One graph a plan reads: its cache key and what the builder needs to build it."""

    key: str
    request: dict[str, Any]  # the typed query plan, JSON
    lake: str
    fingerprint: str


@dataclass(frozen=True)
class Understood:
    """Stage 1's outcome for one question and the answers given so far."""

    outcome: Literal["ready", "clarification", "rejected"]
    understood_as: str | None = None
    graphs: tuple[GraphNeed, ...] = ()
    # clarification
    field: str | None = None
    question: str | None = None
    candidates: tuple[dict[str, Any], ...] = ()
    # rejection
    message: str | None = None
    hint: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelEndpoint:
    """A query's own OpenAI-compatible model (``spec.model``) for its model-backed stages."""

    base_url: str
    name: str


@dataclass(frozen=True)
class SandboxScope:
    """Where the code of one query runs: its user's sandbox pods, in the query's namespace,
    owned by the query, publishing under the query's bucket prefix."""

    query: dict[str, Any]  # apiVersion, kind and metadata (name, namespace, uid) of the owner
    user: str
    prefix: str  # the query's keys in the bucket

    @property
    def namespace(self) -> str:
        return str(self.query["metadata"]["namespace"])


@dataclass(frozen=True)
class Ask:
    """How one query is to be answered, beyond its question and answers."""

    backend: Literal["oda", "sota1", "sota2"] = "oda"
    model: ModelEndpoint | None = None
    analysis: bool = False  # the coordinator plans and draws what the question asks for
    out_dir: Path | None = None  # where the coordinator leaves its files for the bucket
    sandbox: SandboxScope | None = None  # where the code agent's scripts run (the user's pods)


@dataclass(frozen=True)
class GraphInfo:
    """A built graph's cache entry."""

    key: str
    named_graph: str
    triples: int
    bytes: int
    created: datetime
    last_access: datetime


class Pipeline(Protocol):
    def understand(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[tuple[str, str]]
    ) -> Understood:
        """Stage 1 with ``answers`` as (field, text) pairs, one per question asked so far."""
        ...

    def retrieve(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[str],
        ask: Ask | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The answer (``oda-analyst ask --json``'s object) with the clarification answers
        replayed in order; with ``ask.analysis`` the coordinator's, whose ``artifacts`` name
        the files it left in ``ask.out_dir``."""
        ...

    def check_model(self, model: ModelEndpoint) -> str | None:
        """None when ``model`` answers and serves that model, else why not (in plain words)."""
        ...

    def graph(self, key: str) -> GraphInfo | None:
        """The cache entry of a built graph, or None when it is not built (or was evicted)."""
        ...

    def drop_graph(self, key: str) -> None:
        """Evict a graph and its cache entry (no error when it is gone already)."""
        ...
