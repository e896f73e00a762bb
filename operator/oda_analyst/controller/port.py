"""The pipeline the operator drives, as a small Protocol.

The operator never reaches the lake, the graphs or SPARQL itself: it asks this port to
understand a question (stage 1: a plan, a clarification or a refusal, and which graphs the plans
need), to answer it (with the clarification answers replayed: the coordinator when the query asks
for analysis, which runs the retriever and the code agent through their MCP tools; the retriever
alone when it does not; or one of the paper's baselines), whether a query's own model endpoint
answers, and about the graphs' cache entries. The operator's adapter is ``port_http.HttpPipeline``:
the analyst Deployment serves the port (``oda_analyst.pipeline.server``), so no pipeline code
runs in the operator's process. The calls are coroutines: many queries wait on the analyst at
once, none of them holding a thread of the operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

MAX_FILES = 50  # of the coordinator's files per query the analyst returns (and the bucket gets)


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
    owned by the query (``prefix``: the query's keys in the bucket, where the operator puts
    what they made)."""

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
    sandbox: SandboxScope | None = None  # where the code agent's scripts run (the user's pods)
    # Names one answer across calls: the analyst joins a call it is still answering, or returns
    # the answer it just gave, when an operator that restarted asks again (no second run).
    key: str | None = None


@dataclass(frozen=True)
class Retrieved:
    """An answer and what came with it: the whole result table as CSV when the answer's rows
    are not inline (a large result), and the files the coordinator made (relative path, bytes:
    its charts, the scripts that drew them, the tables they read)."""

    answer: dict[str, Any]
    table: bytes | None = None
    files: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Analysis:
    """A script to run in the query's user's sandbox pod: its source, its inputs (/in: file
    name → text) and the files of /out it is to write."""

    scope: SandboxScope
    script: str
    inputs: dict[str, str]
    outputs: tuple[str, ...]
    # Names it across calls: an operator that restarted while the analyst ran it joins that run.
    key: str | None = None


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
    async def understand(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[tuple[str, str]]
    ) -> Understood:
        """Stage 1 with ``answers`` as (field, text) pairs, one per question asked so far."""
        ...

    async def retrieve(
        self, question: str, *, user: str, as_of: datetime, answers: Sequence[str],
        ask: Ask | None = None,
    ) -> Retrieved:  # fmt: skip
        """The answer (``oda-analyst ask --json``'s object) with the clarification answers
        replayed in order; with ``ask.analysis`` the coordinator's, with the files it made."""
        ...

    async def check_model(self, model: ModelEndpoint) -> str | None:
        """None when ``model`` answers and serves that model, else why not (in plain words)."""
        ...

    async def analyse(self, analysis: Analysis) -> dict[str, bytes]:
        """Run ``analysis`` in its user's sandbox pod (the analyst makes it: no network, its
        files in and out through the API); the files of ``analysis.outputs`` it wrote. The
        script's own failure is an ``OdaError`` saying why."""
        ...

    async def graph(self, key: str) -> GraphInfo | None:
        """The cache entry of a built graph, or None when it is not built (or was evicted)."""
        ...

    async def drop_graph(self, key: str) -> None:
        """Evict a graph and its cache entry (no error when it is gone already)."""
        ...
