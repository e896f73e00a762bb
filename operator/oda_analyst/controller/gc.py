"""VKGCache garbage collection, pure: expired by TTL, or beyond the namespace's bounds (a count
and a total size), least recently accessed first; never a cache a running query reads."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from oda_analyst.controller import names


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def last_access(cache: Mapping[str, Any]) -> datetime | None:
    status = _status(cache)
    return _time(status.get("lastAccess")) or _time(status.get("created"))


def expired(cache: Mapping[str, Any], now: datetime) -> bool:
    """Ready and not read for longer than its TTL."""
    seen = last_access(cache)
    if _status(cache).get("phase") != "Ready" or seen is None:
        return False
    ttl = int((cache.get("spec") or {}).get("ttlSeconds") or 86400)
    return now - seen > timedelta(seconds=ttl)


def in_use(queries: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the caches that a query not yet finished reads (``status.graphs``): its
    retrieval may still be ahead of it, and deleting its graph would send it back to stage 1."""
    used: set[str] = set()
    for q in queries:
        status = _status(q)
        if status.get("phase") in names.TERMINAL:
            continue
        used.update(str(g["cache"]) for g in status.get("graphs") or [] if g.get("cache"))
    return frozenset(used)


def lru_victims(caches: Sequence[Mapping[str, Any]], capacity: int, *, max_bytes: int = 0,
                protected: Collection[str] = ()) -> list[str]:  # fmt: skip
    """Names of the least recently accessed Ready caches to delete so that at most
    ``capacity`` stay and (when ``max_bytes`` > 0) their graphs total at most ``max_bytes``.
    Building caches are never chosen (a query waits for them), nor ``protected`` ones (a query
    reads them); both still count towards the bounds."""
    ready = [c for c in caches if _status(c).get("phase") == "Ready"]
    count = len(ready)
    size = sum(int(_status(c).get("bytes") or 0) for c in ready)
    candidates = [c for c in ready if c["metadata"]["name"] not in protected]
    candidates.sort(key=lambda c: (last_access(c) or datetime.min.replace(tzinfo=UTC),
                                   c["metadata"]["name"]))  # fmt: skip
    victims: list[str] = []
    for cache in candidates:
        if count <= capacity and (max_bytes <= 0 or size <= max_bytes):
            break
        victims.append(cache["metadata"]["name"])
        count -= 1
        size -= int(_status(cache).get("bytes") or 0)
    return victims


def why_collect(cache: Mapping[str, Any], now: datetime, *, caches: Sequence[Mapping[str, Any]],
                queries: Iterable[Mapping[str, Any]], capacity: int, max_bytes: int = 0
                ) -> str | None:  # fmt: skip
    """Why the Ready ``cache`` is to be deleted now (its TTL, or the namespace's bounds over
    its ``caches``), or None to keep it; a cache one of the unfinished ``queries`` reads is
    kept whatever its age."""
    name = cache["metadata"]["name"]
    used = in_use(queries)
    if name in used:
        return None
    if expired(cache, now):
        return f"not read for longer than its TTL ({(cache.get('spec') or {}).get('ttlSeconds')} s)"
    if name in lru_victims(caches, capacity, max_bytes=max_bytes, protected=used):
        bound = f"{capacity} caches" + (f" or {max_bytes} bytes" if max_bytes else "")
        return f"least recently used beyond {bound} per namespace"
    return None
