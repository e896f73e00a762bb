"""Test-suite options shared by every tier."""

from __future__ import annotations

import pytest


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
