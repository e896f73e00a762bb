"""Test-suite options shared by every tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llama_server import ModelEndpoint, start_llama
from oda_analyst.llm import MEMORY

# Registered once here, not imported by each tier's conftest: a fixture imported into two
# conftest files is two fixtures, so a session-scoped one ran twice a session (the operator
# tests started two Kubernetes control planes).
pytest_plugins = ["kube_fixtures"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-gpu", action="store_true", help="run tests that need a GPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-gpu"):
        return
    skip_gpu = pytest.mark.skip(reason="needs a GPU: run with --run-gpu on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_itemcollected(item: pytest.Item) -> None:
    # Tiers are folders; the marker follows the folder so `-m "not integration"` works.
    parts = item.path.parts
    for tier in ("integration", "e2e"):
        if tier in parts:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(autouse=True)
def _fresh_model_memory() -> Iterator[None]:
    """What the LLM client learnt about endpoints (unusable, structured form) is per test."""
    MEMORY.forget()
    yield
    MEMORY.forget()


# --- the real model server (llama.cpp serving SmolLM2-135M on CPU) ------------------------------
# Here, not in a tier's conftest: one server per session serves the integration tier's client
# and retriever tests and the e2e tier's coordinator tests alike (starting one costs seconds,
# and each one's prompt cache warms only with use).


@pytest.fixture(scope="session")
def llama() -> Iterator[ModelEndpoint]:
    """The real model server, started once per session with the context of a deployment."""
    server, endpoint = start_llama(8192)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_small_context() -> Iterator[ModelEndpoint]:
    """A second server whose context (512 tokens) no stage prompt fits."""
    server, endpoint = start_llama(512)
    try:
        yield endpoint
    finally:
        server.stop()
