"""IRIs, SPARQL literals and RDF literal values: the helpers every store module shares.

No other ``vkg`` module is imported here, so the stores, the cache and the TSV reader can all
use these without importing one another (an import-linter contract keeps it so).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import pyoxigraph as ox

from oda_analyst.errors import StoreError
from oda_analyst.ontology.namespaces import RDF_NS, XSD_NS

# How many triples graph_bytes serialises to estimate a graph's N-Triples size.
BYTES_SAMPLE = 1000

_IRI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# -- IRIs and literals in SPARQL text -----------------------------------------------------------


def check_iri(iri: str) -> str:
    """``iri`` if it is an absolute IRI that can be written as ``<iri>`` in SPARQL, else
    StoreError (so no text can break out of the angle brackets)."""
    if not _IRI_SCHEME.match(iri):
        raise StoreError(f"not an absolute IRI: {iri!r}", hint="graph names are absolute IRIs")
    try:
        ox.NamedNode(iri)
    except ValueError as exc:
        raise StoreError(
            f"invalid IRI {iri!r}: {exc}", hint="graph names are absolute IRIs"
        ) from None
    return iri


def sparql_string(text: str) -> str:
    """A quoted SPARQL string literal with every character that could end it escaped."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def count_query(graph: str) -> str:
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{check_iri(graph)}> {{ ?s ?p ?o }} }}"


def sample_query(graph: str, limit: int = BYTES_SAMPLE) -> str:
    return (
        f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{check_iri(graph)}> {{ ?s ?p ?o }} }} "
        f"LIMIT {int(limit)}"
    )


def estimate_bytes(sample_bytes: int, sample_triples: int, total_triples: int) -> int:
    """Scale the N-Triples size of a sample to the whole graph."""
    if sample_triples == 0:
        return 0
    if sample_triples >= total_triples:
        return sample_bytes
    return round(sample_bytes * total_triples / sample_triples)


# -- RDF terms to Python values -----------------------------------------------------------------

_INTEGER_TYPES = frozenset(
    XSD_NS + name
    for name in (
        "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
        "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
        "unsignedByte",
    )
)  # fmt: skip
_FLOAT_TYPES = frozenset((XSD_NS + "double", XSD_NS + "float"))
_DATETIME_TYPES = frozenset((XSD_NS + "dateTime", XSD_NS + "dateTimeStamp"))
_STRING_TYPES = frozenset((XSD_NS + "string", RDF_NS + "langString"))
_SPECIAL_FLOATS = {"INF": "inf", "+INF": "inf", "-INF": "-inf", "NaN": "nan"}


def parse_datetime(lexical: str) -> datetime:
    """An xsd:dateTime lexical form as an aware UTC datetime (no zone is read as UTC)."""
    text = lexical.strip()
    text = text[:-1] + "+00:00" if text.endswith("Z") else text
    # Python keeps microseconds: cut longer fractions (nanoseconds) rather than fail.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def literal_value(lexical: str, datatype: str) -> Any:
    """A literal converted by datatype; the lexical form when it is not a valid value."""
    try:
        if datatype in _STRING_TYPES:
            return lexical
        if datatype in _INTEGER_TYPES:
            return int(lexical)
        if datatype in _FLOAT_TYPES:
            return float(_SPECIAL_FLOATS.get(lexical, lexical))
        if datatype == XSD_NS + "decimal":
            return Decimal(lexical)
        if datatype == XSD_NS + "boolean":
            if lexical in ("true", "1", "false", "0"):
                return lexical in ("true", "1")
            return lexical
        if datatype in _DATETIME_TYPES:
            return parse_datetime(lexical)
        if datatype == XSD_NS + "date":
            return date.fromisoformat(lexical[:10])
    except (ValueError, InvalidOperation):
        return lexical
    return lexical


def term_value(term: Any) -> Any:
    """A pyoxigraph term (or None for unbound) as a Python value."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.Literal):
        return literal_value(term.value, term.datatype.value)
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return str(term)  # RDF-star triple terms
