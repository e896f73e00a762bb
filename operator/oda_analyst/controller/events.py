"""Kubernetes events about our objects, posted by kopf (asynchronously, in order)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

MAX_MESSAGE = 1000  # the API server keeps 1 KiB of an event's message


def info(obj: Mapping[str, Any], reason: str, message: str) -> None:
    # kopf takes any mapping with apiVersion, kind and metadata as the object referred to.
    body: Any = obj
    kopf.info(body, reason=reason, message=message[:MAX_MESSAGE])


def warn(obj: Mapping[str, Any], reason: str, message: str) -> None:
    body: Any = obj
    kopf.warn(body, reason=reason, message=message[:MAX_MESSAGE])
