"""Test-suite options shared by every tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oda_analyst.llm import MEMORY


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
