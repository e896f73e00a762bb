"""What a pod's status says about why it failed or cannot start (pure: read from its status)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Waiting reasons of a container that will not start by waiting longer.
CANNOT_START = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                          "ErrImageNeverPull", "CreateContainerConfigError",
                          "CreateContainerError", "RunContainerError"})  # fmt: skip


def pod_message(pod: Mapping[str, Any]) -> str:
    """Why a finished pod failed: the first container that exited non-zero, with its message
    (its last log lines under FallbackToLogsOnError), else the pod's own reason."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or {}
        if term.get("exitCode"):
            return f"{cs['name']} exited {term['exitCode']}: {term.get('message') or ''}".strip()
    reason, message = status.get("reason"), status.get("message")
    if reason and message:
        return f"{reason}: {message}"
    return str(message or reason or "failed")


def cannot_start(pod: Mapping[str, Any]) -> str | None:
    """Why a pending pod's container will never start (its image cannot be pulled, its
    configuration is refused), or None while it may still start."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in CANNOT_START:
            detail = waiting.get("message") or cs.get("image") or ""
            return f"{cs['name']}: {waiting['reason']}" + (f" ({detail})" if detail else "")
    return None
