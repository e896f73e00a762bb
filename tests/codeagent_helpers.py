"""Shared by the code-agent tests: which real sandboxes run here, and PNG facts."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from oda_analyst.codeagent.backends.bwrap import BwrapBackend
from oda_analyst.codeagent.backends.gvisor import GVisorBackend

BACKENDS = {"gvisor": GVisorBackend, "bwrap": BwrapBackend}


def require(name: str) -> str:
    """``name`` if that sandbox runs here, else skip saying why (setup.sh installs both)."""
    reason = BACKENDS[name]().unavailable_reason()
    if reason is not None:
        pytest.skip(f"{name}: {reason}")
    return name


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG header; fails on anything that is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)
