"""VKGCache garbage collection, pure: expired by TTL, or beyond the LRU bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def last_access(cache: Mapping[str, Any]) -> datetime | None:
    status = cache.get("status") or {}
    return _time(status.get("lastAccess")) or _time(status.get("created"))


def expired(cache: Mapping[str, Any], now: datetime) -> bool:
    """Ready and not read for longer than its TTL."""
    seen = last_access(cache)
    if (cache.get("status") or {}).get("phase") != "Ready" or seen is None:
        return False
    ttl = int((cache.get("spec") or {}).get("ttlSeconds") or 86400)
    return now - seen > timedelta(seconds=ttl)


def lru_victims(caches: Sequence[Mapping[str, Any]], capacity: int) -> list[str]:
    """Names of the least recently used Ready caches beyond ``capacity`` (building ones are
    never chosen: a query is waiting for them)."""
    ready = [c for c in caches if (c.get("status") or {}).get("phase") == "Ready"]
    excess = len(ready) - capacity
    if excess <= 0:
        return []
    ready.sort(key=lambda c: (last_access(c) or datetime.min.replace(tzinfo=UTC),
                              c["metadata"]["name"]))  # fmt: skip
    return [c["metadata"]["name"] for c in ready[:excess]]
