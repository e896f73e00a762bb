"""What this process learned about model endpoints, shared by every client of one endpoint+model.

Two facts: the structured-output form a server takes (asked once), and that a server is
unusable (until when, and why), so later calls fail at once instead of asking it again.
"""

from __future__ import annotations

import threading

from oda_analyst.llm.types import StructuredMode

Endpoint = tuple[str, str]
"""(base URL, model)."""


class EndpointMemory:
    """Thread-safe: stages call the model from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.modes: dict[Endpoint, StructuredMode] = {}
        self.down: dict[Endpoint, tuple[str, float]] = {}

    def mode(self, key: Endpoint) -> StructuredMode | None:
        with self._lock:
            return self.modes.get(key)

    def learn_mode(self, key: Endpoint, mode: StructuredMode) -> None:
        with self._lock:
            self.modes[key] = mode

    def down_reason(self, key: Endpoint, now: float) -> str | None:
        with self._lock:
            entry = self.down.get(key)
            if entry is None:
                return None
            if now >= entry[1]:
                del self.down[key]
                return None
            return entry[0]

    def mark_down(self, key: Endpoint, reason: str, until: float) -> None:
        with self._lock:
            self.down[key] = (reason, until)

    def forget(self, key: Endpoint | None = None) -> None:
        with self._lock:
            if key is None:
                self.modes.clear()
                self.down.clear()
            else:
                self.modes.pop(key, None)
                self.down.pop(key, None)


MEMORY = EndpointMemory()
