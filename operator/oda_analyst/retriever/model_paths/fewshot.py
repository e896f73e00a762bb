"""Top-k curated question→SPARQL examples for the SPARQL prompt (retrieval-augmented few-shot).

The curated pairs live in ``ontology/examples/examples.yaml``. With an embedder (the retriever's
all-MiniLM-L6-v2, ``retriever.embeddings.load_embedder()``) the examples are ranked by cosine
similarity of question embeddings, as in the paper; without one, by an IDF-weighted
token-overlap cosine computed here. Both rankings are deterministic: ties keep the file's order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.retriever.grounding.embeddings import Embedder, Vectors

EXAMPLES_FILE = Path("examples") / "examples.yaml"

_WORD = re.compile(r"[a-z0-9]+")
# Words that say nothing about which query shape fits; kept short and explicit.
_STOP = frozenset({
    "a", "an", "and", "are", "at", "between", "by", "during", "each", "for", "from", "give",
    "how", "in", "is", "it", "me", "of", "on", "or", "over", "per", "show", "the", "their",
    "there", "to", "was", "were", "what", "which", "with",
})  # fmt: skip
# Dates and ids differ between any two questions and say nothing about the query's shape.
_MONTHS = frozenset({
    "jan", "january", "feb", "february", "mar", "march", "apr", "april", "may", "jun", "june",
    "jul", "july", "aug", "august", "sep", "sept", "september", "oct", "october", "nov",
    "november", "dec", "december",
})  # fmt: skip


@dataclass(frozen=True)
class CuratedExample:
    id: str
    question: str
    sparql: str
    paper: str | None = None


@dataclass(frozen=True)
class ScoredExample:
    example: CuratedExample
    score: float


def examples_path() -> Path:
    return get_settings().ontology_dir / EXAMPLES_FILE


def load_examples(path: Path | None = None) -> tuple[CuratedExample, ...]:
    """The curated examples (default: the configured ontology folder); cached per file."""
    resolved = (path or examples_path()).resolve()
    if not resolved.is_file():
        raise OntologyError(
            f"curated SPARQL examples not found: {resolved}",
            hint="set ODA_ONTOLOGY_DIR to the folder holding examples/examples.yaml",
        )
    return _load_cached(resolved, resolved.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _load_cached(path: Path, mtime_ns: int) -> tuple[CuratedExample, ...]:
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise OntologyError(f"cannot parse {path}: {exc}", hint="fix the YAML") from None
    items = data.get("examples") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise OntologyError(f"{path} has no 'examples' list", hint="see the file's header")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("question") or not item.get("sparql"):
            raise OntologyError(
                f"{path}: example {i} needs a question and a sparql", hint="add both fields"
            )
        paper = item.get("paper")
        out.append(
            CuratedExample(
                id=str(item.get("id") or f"example-{i}"),
                question=str(item["question"]).strip(),
                sparql=str(item["sparql"]).strip(),
                paper=None if paper is None else str(paper),
            )
        )
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Lower-case content words; British/American spellings and plurals folded together."""
    out = []
    for raw in _WORD.findall(text.lower().replace("iz", "is")):
        if raw in _STOP or raw in _MONTHS or raw.isdigit():
            continue
        plural = len(raw) > 3 and raw.endswith("s") and not raw.endswith("ss")
        out.append(raw[:-1] if plural else raw)
    return out


def overlap_scores(question: str, texts: Sequence[str]) -> list[float]:
    """IDF-weighted cosine between the question's and each text's set of tokens.

    IDF comes from ``texts`` themselves, so a word every example shares ("temperature" in a
    thermal corpus) counts little and a rare one ("weather", "job") decides.
    """
    docs = [set(tokens(t)) for t in texts]
    n = len(docs)
    df = Counter(w for d in docs for w in d)

    def idf(word: str) -> float:
        return math.log((n + 1) / (df.get(word, 0) + 1)) + 1.0

    query = set(tokens(question))
    q_norm = math.sqrt(sum(idf(w) ** 2 for w in query))
    scores = []
    for doc in docs:
        d_norm = math.sqrt(sum(idf(w) ** 2 for w in doc))
        shared = sum(idf(w) ** 2 for w in query & doc)
        scores.append(shared / (q_norm * d_norm) if q_norm and d_norm else 0.0)
    return scores


_example_vectors: dict[tuple[int, tuple[str, ...]], Vectors] = {}


def embedding_scores(question: str, texts: Sequence[str], embedder: Embedder) -> list[float]:
    """Cosine similarity of the question to each text (the embedder's rows are L2-normalised).

    The texts' vectors are kept per embedder: the curated examples are embedded once a process.
    """
    key = (id(embedder), tuple(texts))
    vectors = _example_vectors.get(key)
    if vectors is None:
        vectors = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
        if vectors.shape[0] != len(texts):
            raise ValueError(f"the embedder returned {vectors.shape[0]} rows for {len(texts)}")
        if len(_example_vectors) < 16:
            _example_vectors[key] = vectors
    query = np.asarray(embedder.encode([question]), dtype=np.float32)[0]
    return [float(x) for x in vectors @ query]


def select_examples(
    question: str,
    examples: Sequence[CuratedExample],
    k: int = 3,
    *,
    embedder: Embedder | None = None,
) -> list[ScoredExample]:
    """The ``k`` examples whose questions are most similar to ``question``, best first."""
    if k <= 0 or not examples:
        return []
    texts = [e.question for e in examples]
    scores = (
        embedding_scores(question, texts, embedder)
        if embedder is not None
        else overlap_scores(question, texts)
    )
    ranked = sorted(range(len(examples)), key=lambda i: (-scores[i], i))
    return [ScoredExample(examples[i], round(scores[i], 6)) for i in ranked[:k]]
