"""SPARQL text fragments of the compiler: terms, literals and the ontology's traversal paths.

Every fragment is a list of lines (no indentation; ``block`` indents nested groups) so the
compiler assembles readable queries: one triple per line, FILTER/BIND on their own lines.
Traversal paths follow ``ontology/oda.ttl`` in the direction instance data writes them:
``sensor oda:observes entity`` (``oda:hasSensor`` is only its inferred inverse),
``node oda:hasGPU gpu``, ``rack oda:hasNode node``, ``room oda:hasRack rack``,
``job oda:runsOn node``, ``job oda:submittedBy user``, ``system oda:hasComputeNode node``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

from oda_analyst.errors import UsageError

Lines = list[str]

# Node part reached from ?node for each catalogue entity: (property, variable, index property).
NODE_PART_PATHS: dict[str, tuple[str, str, str]] = {
    "GPU": ("oda:hasGPU", "?gpu", "oda:gpuIndex"),
    "CPU": ("oda:hasCPU", "?cpu", "oda:socketIndex"),
    "MemoryModule": ("oda:hasMemory", "?memory", "oda:dimmIndex"),
    "Fan": ("oda:hasFan", "?fan", "oda:fanIndex"),
    "PowerSupply": ("oda:hasPowerSupply", "?psu", "oda:psuIndex"),
}
# Order in which sensor paths appear inside a UNION (stable text).
ENTITY_ORDER = ("ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply")


def iri(value: str) -> str:
    """``<iri>``; rejects characters an IRIREF may not hold (the builders never produce them)."""
    if any(c in value for c in '<>"{}|^`\\ \n\t'):
        raise UsageError(f"not a valid IRI: {value!r}", hint="build IRIs with ontology.namespaces")
    return f"<{value}>"


def string_literal(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def datetime_literal(value: datetime) -> str:
    """Typed UTC literal, e.g. ``"2022-06-01T20:00:00Z"^^xsd:dateTime`` (ms kept when set)."""
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond // 1000:03d}"
    return f'"{text}Z"^^xsd:dateTime'


def date_literal(value: date) -> str:
    return f'"{value.isoformat()}"^^xsd:date'


def triple(s: str, p: str, o: str) -> str:
    return f"{s} {p} {o} ."


def values(var: str, terms: Sequence[str], width: int = 96) -> Lines:
    """``VALUES ?v { ... }`` on one line when it fits in ``width``, else one term per line."""
    line = f"VALUES {var} {{ {' '.join(terms)} }}"
    if len(line) <= width:
        return [line]
    return [f"VALUES {var} {{", *[f"  {t}" for t in terms], "}"]


def block(lines: Iterable[str], indent: str = "  ") -> Lines:
    return [f"{indent}{line}" if line else line for line in lines]


def group(lines: Lines) -> Lines:
    return ["{", *block(lines), "}"]


def union(groups: Sequence[Lines]) -> Lines:
    if len(groups) == 1:
        return groups[0]
    out: Lines = []
    for i, g in enumerate(groups):
        if i:
            out.append("UNION")
        out += group(g)
    return out


def in_filter(var: str, items: Sequence[int | str]) -> str:
    """Value comparison (``IN``) rather than VALUES, so xsd:int and xsd:integer both match."""
    terms = ", ".join(str(i) if isinstance(i, int) else string_literal(i) for i in items)
    return f"FILTER({var} IN ({terms}))"


def sensor_paths(entities: Iterable[str], anchor: str, index_var: str | None) -> Lines:
    """Bind ``?sensor`` to the sensors of ``anchor`` (a node) and of its parts.

    ``entities`` are the catalogue entities of the requested metrics; a node metric's sensor
    observes the node, a GPU metric's sensor the GPU (node -> oda:hasGPU -> gpu), and so on.
    Several entity classes give a UNION with one branch per class. ``index_var`` binds the
    part's index (single part class only: gpu_index for GPU metrics).
    """
    wanted = [e for e in ENTITY_ORDER if e in set(entities)]
    branches: list[Lines] = []
    for entity in wanted:
        if entity == "ComputeNode":
            branches.append([triple("?sensor", "oda:observes", anchor)])
            continue
        prop, var, index_prop = NODE_PART_PATHS[entity]
        lines = [triple(anchor, prop, var), triple("?sensor", "oda:observes", var)]
        if index_var is not None:
            lines.append(triple(var, index_prop, index_var))
        branches.append(lines)
    return union(branches)


def hours_between(later: str, earlier: str, out: str) -> Lines:
    """Bind ``out`` to (later − earlier) in hours, as a decimal.

    SPARQL 1.1 has no duration-to-number function and pyoxigraph 0.5 neither divides nor
    multiplies xsd:dayTimeDuration (``xsd:double(?d)`` is unbound), but it subtracts two
    xsd:dateTime values into a canonical dayTimeDuration such as ``P2DT5H30M7.5S``. Its days,
    hours, minutes and seconds are read back with REPLACE; an absent component fails the cast
    and COALESCE makes it 0. Callers guarantee later >= earlier (no leading minus sign).
    """
    text = f"{out}_text"
    parts = [
        ("^P([0-9]+)D.*$", "$1", " * 24"),  # days
        ("^[^T]*T([0-9]+)H.*$", "$1", ""),  # hours
        ("^[^T]*T([0-9]+H)?([0-9]+)M.*$", "$2", " / 60"),  # minutes
        ("^[^T]*T([0-9]+H)?([0-9]+M)?([0-9.]+)S$", "$3", " / 3600"),  # seconds
    ]
    terms = [
        f'COALESCE(xsd:decimal(REPLACE({text}, "{rx}", "{grp}")), 0){scale}'
        for rx, grp, scale in parts
    ]
    return [
        f"BIND(STR({later} - {earlier}) AS {text})",
        f"BIND(({terms[0]}",
        *[f"      + {t}" for t in terms[1:]],
        f"     ) AS {out})",
    ]


def later_of(a: str, b: str) -> str:
    return f"IF({a} > {b}, {a}, {b})"


def earlier_of(a: str, b: str) -> str:
    return f"IF({a} < {b}, {a}, {b})"


def bucket_expr(time_var: str, unit: str) -> str:
    """UTC calendar bucket of a timestamp from its lexical form (readings carry ``…Z`` times)."""
    if unit == "day":
        return f"STRDT(SUBSTR(STR({time_var}), 1, 10), xsd:date)"
    if unit == "hour":
        return f'STRDT(CONCAT(SUBSTR(STR({time_var}), 1, 13), ":00:00Z"), xsd:dateTime)'
    if unit == "minute":
        return f'STRDT(CONCAT(SUBSTR(STR({time_var}), 1, 16), ":00Z"), xsd:dateTime)'
    raise UsageError(f"unknown time bucket {unit!r}", hint="use minute, hour or day")
