"""Structured findings of the SPARQL validator.

A repair loop keys on ``Diagnostic.code`` (stable strings, listed in ``CODES``); a person reads
``message``; both can act on ``pattern`` (the offending triple, clause or expression as text) and
``suggestion`` (for example the nearest valid property).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]

# Stable codes; the repair loop and the tests key on them.
SYNTAX = "syntax"
UPDATE_FORBIDDEN = "update_forbidden"
SERVICE_FORBIDDEN = "service_forbidden"
GRAPH_FORBIDDEN = "graph_forbidden"
UNKNOWN_CLASS = "unknown_class"
UNKNOWN_PROPERTY = "unknown_property"
UNKNOWN_ENTITY = "unknown_entity"
DOMAIN_VIOLATION = "domain_violation"
RANGE_VIOLATION = "range_violation"
DATATYPE_VIOLATION = "datatype_violation"
FILTER_DATATYPE_VIOLATION = "filter_datatype_violation"
UNBOUND_PROJECTION = "unbound_projection"
UNBOUND_FILTER_VARIABLE = "unbound_filter_variable"
UNBOUND_BIND_VARIABLE = "unbound_bind_variable"
UNGROUPED_PROJECTION = "ungrouped_projection"
DISCONNECTED_PATTERN = "disconnected_pattern"
DISJOINT_TYPES = "disjoint_types"

CODES: frozenset[str] = frozenset(
    {
        SYNTAX,
        UPDATE_FORBIDDEN,
        SERVICE_FORBIDDEN,
        GRAPH_FORBIDDEN,
        UNKNOWN_CLASS,
        UNKNOWN_PROPERTY,
        UNKNOWN_ENTITY,
        DOMAIN_VIOLATION,
        RANGE_VIOLATION,
        DATATYPE_VIOLATION,
        FILTER_DATATYPE_VIOLATION,
        UNBOUND_PROJECTION,
        UNBOUND_FILTER_VARIABLE,
        UNBOUND_BIND_VARIABLE,
        UNGROUPED_PROJECTION,
        DISCONNECTED_PATTERN,
        DISJOINT_TYPES,
    }
)


@dataclass(frozen=True)
class Diagnostic:
    """One finding: what rule broke, where, and what would fix it."""

    code: str
    message: str
    pattern: str | None = None
    suggestion: str | None = None
    severity: Severity = "error"
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ValidationReport:
    """The verdict on one SPARQL text: ``ok`` is true when no diagnostic is an error."""

    ok: bool
    diagnostics: tuple[Diagnostic, ...]
    query_form: str
    variables: tuple[str, ...]
    graphs: tuple[str, ...]

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(d.code for d in self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "query_form": self.query_form,
            "variables": list(self.variables),
            "graphs": list(self.graphs),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


def report(
    diagnostics: list[Diagnostic],
    *,
    query_form: str,
    variables: tuple[str, ...] = (),
    graphs: tuple[str, ...] = (),
) -> ValidationReport:
    """Build a report, dropping duplicate diagnostics while keeping their first order."""
    unique = tuple(dict.fromkeys(diagnostics))
    ok = not any(d.severity == "error" for d in unique)
    return ValidationReport(ok, unique, query_form, variables, graphs)
