"""Datatype families of literals and of SPARQL expressions.

Two values can be compared in a FILTER, or a literal can match a data property, only within one
family: numeric (integer, decimal, double, ...; promotion between them is allowed), dateTime,
date, string (simple, xsd:string or language-tagged), boolean, duration; "resource" stands for
IRIs and blank nodes. ``None`` means unknown: nothing is reported about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rdflib.namespace import XSD
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import BNode, Literal, URIRef, Variable

NUMERIC = "numeric"
DATETIME = "dateTime"
STRING = "string"
BOOLEAN = "boolean"
RESOURCE = "resource"

_X = str(XSD)
_INTEGERS = {
    "integer",
    "int",
    "long",
    "short",
    "byte",
    "nonNegativeInteger",
    "nonPositiveInteger",
    "positiveInteger",
    "negativeInteger",
    "unsignedLong",
    "unsignedInt",
    "unsignedShort",
    "unsignedByte",
}
_FAMILY: dict[str, str] = {_X + n: NUMERIC for n in (*_INTEGERS, "decimal", "double", "float")}
_FAMILY.update(
    {
        _X + "dateTime": DATETIME,
        _X + "dateTimeStamp": DATETIME,
        _X + "date": "date",
        _X + "time": "time",
        _X + "string": STRING,
        _X + "normalizedString": STRING,
        _X + "token": STRING,
        _X + "language": STRING,
        _X + "boolean": BOOLEAN,
        _X + "duration": "duration",
        _X + "dayTimeDuration": "duration",
        _X + "yearMonthDuration": "duration",
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString": STRING,
    }
)

_BOOLEAN_OPS = {
    "RelationalExpression",
    "ConditionalAndExpression",
    "ConditionalOrExpression",
    "UnaryNot",
    "Builtin_BOUND",
    "Builtin_REGEX",
    "Builtin_isIRI",
    "Builtin_isURI",
    "Builtin_isBLANK",
    "Builtin_isLITERAL",
    "Builtin_isNUMERIC",
    "Builtin_sameTerm",
    "Builtin_LANGMATCHES",
    "Builtin_CONTAINS",
    "Builtin_STRSTARTS",
    "Builtin_STRENDS",
    "Builtin_EXISTS",
    "Builtin_NOTEXISTS",
}
_STRING_OPS = {
    "Builtin_STR",
    "Builtin_LCASE",
    "Builtin_UCASE",
    "Builtin_CONCAT",
    "Builtin_SUBSTR",
    "Builtin_STRBEFORE",
    "Builtin_STRAFTER",
    "Builtin_REPLACE",
    "Builtin_ENCODE_FOR_URI",
    "Builtin_LANG",
    "Builtin_MD5",
    "Builtin_SHA1",
    "Builtin_SHA256",
    "Builtin_SHA384",
    "Builtin_SHA512",
    "Builtin_STRUUID",
    "Builtin_TZ",
    "Builtin_STRLANG",
}
_NUMERIC_OPS = {
    "Builtin_YEAR",
    "Builtin_MONTH",
    "Builtin_DAY",
    "Builtin_HOURS",
    "Builtin_MINUTES",
    "Builtin_SECONDS",
    "Builtin_STRLEN",
    "Builtin_ABS",
    "Builtin_ROUND",
    "Builtin_CEIL",
    "Builtin_FLOOR",
    "Builtin_RAND",
}
_RESOURCE_OPS = {"Builtin_IRI", "Builtin_URI", "Builtin_BNODE", "Builtin_UUID", "Builtin_DATATYPE"}


def _get(node: Any, key: str) -> Any:
    # CompValue.get returns the key itself when it is missing; plain dict lookup does not.
    return dict.get(node, key) if isinstance(node, dict) else None


def datatype_family(iri: str | None) -> str | None:
    if iri is None:
        return STRING
    return _FAMILY.get(iri)


def is_integer_type(iri: str) -> bool:
    return iri.startswith(_X) and iri[len(_X) :] in _INTEGERS


def literal_family(lit: Literal) -> str | None:
    if lit.language is not None:
        return STRING
    return datatype_family(str(lit.datatype) if lit.datatype is not None else None)


_DECIMAL = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_TZ = r"(?:Z|[+-]\d{2}:\d{2})?"
_LEXICAL: dict[str, re.Pattern[str]] = {
    _X + "decimal": re.compile(_DECIMAL),
    _X + "double": re.compile(rf"{_DECIMAL}(?:[eE][+-]?\d+)?|[+-]?INF|NaN"),
    _X + "float": re.compile(rf"{_DECIMAL}(?:[eE][+-]?\d+)?|[+-]?INF|NaN"),
    _X + "dateTime": re.compile(
        rf"-?\d{{4,}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)?{_TZ}"
    ),
    _X + "date": re.compile(rf"-?\d{{4,}}-\d{{2}}-\d{{2}}{_TZ}"),
    _X + "boolean": re.compile(r"true|false|1|0"),
}
_INTEGER_LEXICAL = re.compile(r"[+-]?\d+")


def ill_typed(lit: Literal) -> bool:
    """True when the lexical form is not valid for the datatype ("abc"^^xsd:double).

    rdflib's SPARQL parser does not compute ``Literal.ill_typed``, so the XSD lexical spaces of
    the datatypes the ontology uses are checked here.
    """
    if lit.datatype is None:
        return False
    datatype = str(lit.datatype)
    pattern = _INTEGER_LEXICAL if is_integer_type(datatype) else _LEXICAL.get(datatype)
    return pattern is not None and pattern.fullmatch(str(lit).strip()) is None


def short_datatype(iri: str | None) -> str:
    if iri is None:
        return "xsd:string"
    return "xsd:" + iri[len(_X) :] if iri.startswith(_X) else f"<{iri}>"


def show_literal(lit: Literal) -> str:
    """A literal as written in SPARQL (rdflib's n3() warns about ill-typed numbers)."""
    text = '"' + str(lit).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if lit.language is not None:
        return f"{text}@{lit.language}"
    return text if lit.datatype is None else f"{text}^^{short_datatype(str(lit.datatype))}"


def literal_datatype(lit: Literal) -> str:
    if lit.language is not None:
        return f"@{lit.language} string"
    return short_datatype(str(lit.datatype) if lit.datatype is not None else None)


def expr_family(expr: Any, env: Mapping[Variable, str]) -> str | None:
    """Family of an expression's value, or None when it cannot be told statically."""
    if isinstance(expr, Variable):
        return env.get(expr)
    if isinstance(expr, Literal):
        return literal_family(expr)
    if isinstance(expr, URIRef | BNode):
        return RESOURCE
    if not isinstance(expr, CompValue):
        return None
    name = expr.name
    if name in _BOOLEAN_OPS:
        return BOOLEAN
    if name in _STRING_OPS:
        return STRING
    if name in _NUMERIC_OPS:
        return NUMERIC
    if name in _RESOURCE_OPS:
        return RESOURCE
    if name == "Builtin_NOW":
        return DATETIME
    if name == "Function":
        iri = _get(expr, "iri")
        return datatype_family(str(iri)) if isinstance(iri, URIRef) else None
    if name in ("AdditiveExpression", "MultiplicativeExpression", "UnaryMinus", "UnaryPlus"):
        operands = [_get(expr, "expr"), *(_get(expr, "other") or [])]
        families = {expr_family(o, env) for o in operands if o is not None}
        return NUMERIC if families == {NUMERIC} else None
    return None


def aggregate_family(name: str, arg: Any, env: Mapping[Variable, str]) -> str | None:
    if name in ("Count", "Sum", "Avg"):
        return NUMERIC
    if name == "GroupConcat":
        return STRING
    return expr_family(arg, env) if arg not in (None, "*") else None


def comparisons(expr: Any) -> list[tuple[Any, str, list[Any]]]:
    """Every (left, op, [right, ...]) comparison inside an expression, EXISTS excluded."""
    found: list[tuple[Any, str, list[Any]]] = []
    _collect(expr, found.append)
    return found


def _collect(expr: Any, emit: Callable[[tuple[Any, str, list[Any]]], None]) -> None:
    if isinstance(expr, CompValue):
        if expr.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
            return
        if expr.name == "RelationalExpression" and _get(expr, "op") is not None:
            other = _get(expr, "other")
            rights = list(other) if isinstance(other, list | tuple) else [other]
            emit((_get(expr, "expr"), str(_get(expr, "op")), rights))
        for key, value in expr.items():
            if key != "_vars":
                _collect(value, emit)
    elif isinstance(expr, list | tuple):
        for item in expr:
            _collect(item, emit)
