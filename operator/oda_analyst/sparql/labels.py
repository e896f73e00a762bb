"""Readable labels for the internal IRIs a query may project (paper §III-C, stage 3).

"SPARQL projections are rewritten to map internal identifiers to human-readable labels": a row
that holds ``https://w3id.org/oda-analyst/m100/gpu/900/0`` shows ``GPU 0 of node 900``. The label
comes from the IRI itself (``namespaces.split_instance_iri`` decodes its segments), so no store
round-trip is needed and a label never depends on what a per-query graph happens to hold.

Ontology terms (``oda:ComputeNode``) and other well-known vocabularies are shortened to their
prefixed names. The store returns IRIs as plain ``str``, so a text literal that spells an
instance IRI is labelled too; the data holds no such literals, and hiding internal identifiers
from the output is the point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from oda_analyst.errors import UsageError
from oda_analyst.ontology.namespaces import INSTANCE_NS, PREFIXES, split_instance_iri

# Kinds whose IRI is <kind>/<name>: the label is "<word> <name>".
_SIMPLE: dict[str, str] = {
    "node": "node",
    "rack": "rack",
    "room": "room",
    "datacenter": "data centre",
    "job": "job",
    "user": "user",
    "system": "system",
    "wlm": "workload manager",
    "crac": "CRAC",
    "plc": "PLC",
    "weather": "weather station",
    "carbon": "carbon intensity of",
}
# Node parts, <kind>/<node>/<index>: "<word> <index> of node <node>".
_PARTS: dict[str, str] = {
    "gpu": "GPU",
    "cpu": "CPU",
    "memory": "memory module",
    "fan": "fan",
    "psu": "power supply",
}
# Longest namespace first, so a namespace that extends another one wins.
_VOCABULARIES = sorted(
    ((ns, p) for p, ns in PREFIXES.items() if p != "m100"), key=lambda item: -len(item[0])
)


def _moment(epoch_ms: str) -> str:
    moment = datetime.fromtimestamp(int(epoch_ms) / 1000, tz=UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _interval(parts: Sequence[str]) -> str:
    return f"interval {_moment(parts[1])} to {_moment(parts[2])}"


def _reading(parts: Sequence[str]) -> str:
    # m100:r/<sensor hash>/<epoch ms>: the sensor is hashed, only the time is readable
    return f"reading at {_moment(parts[2])}"


def _sensor(parts: Sequence[str]) -> str:
    # m100:sensor/<plugin>/<metric>/<entity key...>
    return f"{parts[1]}/{parts[2]} sensor of {'/'.join(parts[3:])}"


_SHAPED: dict[str, tuple[int, Callable[[Sequence[str]], str]]] = {
    # kind: (number of segments after the kind, label builder)
    "metric": (2, lambda p: p[2]),
    "panel": (2, lambda p: f"panel {p[1]} {p[2]}"),
    "time": (2, _interval),
    "r": (2, _reading),
    "graph": (-1, lambda p: f"graph {'/'.join(p[1:])}"),
}


def instance_label(iri: str) -> str:
    """A readable label of an M100 instance IRI (``m100:rack/45`` -> ``rack 45``).

    Unknown or malformed paths fall back to their decoded segments joined with spaces, so the
    namespace never leaks. Raises UsageError for an IRI outside the instance namespace.
    """
    parts = split_instance_iri(iri)
    kind, rest = parts[0], parts[1:]
    try:
        if kind in _SIMPLE and len(rest) == 1:
            return f"{_SIMPLE[kind]} {rest[0]}"
        if kind in _PARTS and len(rest) == 2:
            return f"{_PARTS[kind]} {rest[1]} of node {rest[0]}"
        if kind == "sensor" and len(rest) >= 3:
            return _sensor(parts)
        if kind in _SHAPED:
            arity, build = _SHAPED[kind]
            if arity == len(rest) or (arity < 0 and rest):
                return build(parts)
    except (ValueError, OverflowError, OSError):
        pass  # a time segment that is not epoch milliseconds: use the generic label
    return " ".join(p for p in parts if p)


def label(value: Any) -> Any:
    """``value`` with an IRI replaced by its label; any other value unchanged."""
    if not isinstance(value, str) or "://" not in value[:10]:
        return value
    return _iri_label(value)


@lru_cache(maxsize=1 << 16)
def _iri_label(value: str) -> str:
    # Results repeat the same few IRIs (a node, a metric) on every row: label each once.
    if value.startswith(INSTANCE_NS):
        try:
            return instance_label(value)
        except UsageError:  # the bare namespace itself
            return "m100"
    for namespace, prefix in _VOCABULARIES:
        if value.startswith(namespace) and len(value) > len(namespace):
            return f"{prefix}:{value[len(namespace) :]}"
    return value


def label_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A result row with every IRI value labelled."""
    return tuple(map(label, row))


__all__ = ["instance_label", "label", "label_row"]
