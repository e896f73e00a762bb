"""Parse SPARQL with rdflib and reduce its algebra to a small pattern tree the checks walk.

rdflib's algebra is a tree of ``CompValue`` nodes keyed by name; the validator's checks only need
a dozen shapes, so ``to_pattern`` maps the algebra to frozen dataclasses once (``Bgp``, ``Join``,
``Optional``, ``Union``, ``Minus``, ``Filter``, ``Bind``, ``Values``, ``GraphP``, ``Service``,
``Select``, ``Aggregation``). Expressions stay rdflib objects; the ``EXISTS`` patterns inside a
filter are lifted out as patterns so every check sees them.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from pyparsing import ParseBaseException
from rdflib.namespace import RDF
from rdflib.paths import Path
from rdflib.plugins.sparql.algebra import translateGroupGraphPattern, translateQuery
from rdflib.plugins.sparql.parserutils import CompValue, Expr
from rdflib.term import BNode, Identifier, Literal, URIRef, Variable

from oda_analyst.sparql import diagnostics as dg
from oda_analyst.sparql.grammar import parse_tree, parse_update_tree
from oda_analyst.sparql.grouping import GroupedQuery, grouped_queries
from oda_analyst.sparql.literals import show_literal

Term = Identifier
PathOrTerm: TypeAlias = Identifier | Path

# rdflib logs a full traceback for every ill-typed literal ("abc"^^xsd:double) while parsing;
# the validator reports those itself, so the records are dropped, but only during validation.
_QUIET = contextvars.ContextVar("oda_sparql_quiet", default=False)


class _QuietFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _QUIET.get()


logging.getLogger("rdflib.term").addFilter(_QuietFilter())


@dataclass(frozen=True)
class Triple:
    s: Identifier
    p: PathOrTerm
    o: Identifier


@dataclass(frozen=True)
class Bgp:
    triples: tuple[Triple, ...]


@dataclass(frozen=True)
class Join:
    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class Optional:
    left: Pattern
    right: Pattern
    expr: Any
    exists: tuple[Pattern, ...]


@dataclass(frozen=True)
class Union:
    branches: tuple[Pattern, ...]


@dataclass(frozen=True)
class Minus:
    left: Pattern
    right: Pattern


@dataclass(frozen=True)
class Filter:
    expr: Any
    inner: Pattern
    exists: tuple[Pattern, ...]


@dataclass(frozen=True)
class Bind:
    var: Variable
    expr: Any
    inner: Pattern
    exists: tuple[Pattern, ...]


@dataclass(frozen=True)
class Values:
    variables: tuple[Variable, ...]
    rows: tuple[tuple[Identifier | None, ...], ...]


@dataclass(frozen=True)
class GraphP:
    term: Identifier
    inner: Pattern


@dataclass(frozen=True)
class Service:
    term: Identifier
    text: str


@dataclass(frozen=True)
class Aggregate:
    name: str  # Count, Sum, Avg, Min, Max, Sample, GroupConcat
    res: Variable
    arg: Any  # an expression, a Variable, or "*"


@dataclass(frozen=True)
class Aggregation:
    inner: Pattern
    group_by: tuple[Any, ...]
    aggregates: tuple[Aggregate, ...]


@dataclass(frozen=True)
class Select:
    """A projection: the top query or a sub-select. ``inner`` is everything under it."""

    variables: tuple[Variable, ...]
    inner: Pattern


Pattern: TypeAlias = (
    Bgp
    | Join
    | Optional
    | Union
    | Minus
    | Filter
    | Bind
    | Values
    | GraphP
    | Service
    | Aggregation
    | Select
)


@dataclass(frozen=True)
class ParsedQuery:
    form: str  # SELECT, ASK, CONSTRUCT, DESCRIBE
    root: Pattern
    dataset: tuple[tuple[str, str], ...]  # ("FROM" | "FROM NAMED", iri)
    template: tuple[Triple, ...]
    prefixes: dict[str, str]
    grouped: tuple[GroupedQuery, ...] = ()  # levels that group, read before rdflib's rewrite


class SparqlSyntaxError(Exception):
    def __init__(self, diagnostics: list[dg.Diagnostic], form: str) -> None:
        super().__init__(diagnostics[0].message)
        self.diagnostics = diagnostics
        self.form = form


_UPDATE_WORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY")
# Strings, IRIs and comments are blanked before looking for update keywords in unparsable text.
_NOISE = re.compile(
    r"\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
    r"|<[^<>\"{}|^`\\\s]*>|#[^\n]*"
)
_WORD = re.compile(r"(?<![?$:\w])([A-Za-z]+)(?![\w:])")
_PNAME_SLASH = re.compile(r"(?<![<\w])([A-Za-z][\w.-]*)?:([\w.-]*/[\w./%-]*)")


def parse(text: str) -> ParsedQuery:
    """Parse a query; raise SparqlSyntaxError (with diagnostics) for updates and bad syntax."""
    token = _QUIET.set(True)
    try:
        try:
            tree = parse_tree(text)
        except ParseBaseException as exc:
            raise SparqlSyntaxError(_not_a_query(text, exc), form="UPDATE?") from None
        grouped = grouped_queries(tree)  # before translateQuery rewrites ungrouped variables
        try:
            query = translateQuery(tree)
        except Exception as exc:  # rdflib raises bare Exception for unknown prefixes
            diag = dg.Diagnostic(dg.SYNTAX, f"SPARQL error: {exc}", None, _prefix_hint(str(exc)))
            raise SparqlSyntaxError([diag], form="UNKNOWN") from None
    finally:
        _QUIET.reset(token)
    algebra = query.algebra
    form = {"SelectQuery": "SELECT", "AskQuery": "ASK", "ConstructQuery": "CONSTRUCT"}.get(
        algebra.name, "DESCRIBE"
    )
    prefixes = {str(p): str(ns) for p, ns in query.prologue.namespace_manager.namespaces()}
    dataset: list[tuple[str, str]] = []
    for clause in _get(algebra, "datasetClause") or ():
        if _get(clause, "default") is not None:
            dataset.append(("FROM", str(clause["default"])))
        if _get(clause, "named") is not None:
            dataset.append(("FROM NAMED", str(clause["named"])))
    body = _get(algebra, "p")
    try:
        root: Pattern = to_pattern(body) if body is not None else Bgp(())
    except ValueError as exc:
        diag = dg.Diagnostic(dg.SYNTAX, str(exc), None, "rewrite the query with basic patterns")
        raise SparqlSyntaxError([diag], form="UNKNOWN") from None
    if form == "DESCRIBE" and not isinstance(root, Select):
        described = tuple(v for v in _get(algebra, "PV") or () if isinstance(v, Variable))
        root = Select(described, root)
    template = tuple(Triple(*t) for t in _get(algebra, "template") or ())
    return ParsedQuery(form, root, tuple(dataset), template, prefixes, grouped)


def _not_a_query(text: str, exc: ParseBaseException) -> list[dg.Diagnostic]:
    token = _QUIET.set(True)
    try:
        tree = parse_update_tree(text)
    except ParseBaseException:
        tree = None
    finally:
        _QUIET.reset(token)
    if tree is not None and tree.request:  # an empty text or a bare prologue parses as an update
        ops = sorted({str(req.name) for req in tree.request}) or ["update"]
        names = ", ".join(_update_name(op) for op in ops)
        return [_update_diag(f"SPARQL update ({names}) is not allowed: only queries run here")]
    diags = [_syntax_diag(text, exc)]
    found = sorted(set(_update_words(text)))
    if found:
        diags.insert(0, _update_diag(f"update keywords {', '.join(found)} are not allowed"))
    return diags


def _update_diag(message: str) -> dg.Diagnostic:
    return dg.Diagnostic(
        dg.UPDATE_FORBIDDEN, message, None, "send one read-only SELECT, ASK or CONSTRUCT query"
    )


def _update_name(op: str) -> str:
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", op).upper()
    return words.replace("INSERT DATA", "INSERT DATA").replace("MODIFY", "INSERT/DELETE WHERE")


def _update_words(text: str) -> Iterator[str]:
    for match in _WORD.finditer(_NOISE.sub(" ", text)):
        word = match.group(1).upper()
        if word in _UPDATE_WORDS:
            yield word


def _syntax_diag(text: str, exc: ParseBaseException) -> dg.Diagnostic:
    line, col = exc.lineno, exc.col
    source_line = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
    suggestion = None
    slash = _PNAME_SLASH.search(source_line)
    if slash:
        suggestion = (
            f"a prefixed name cannot contain '/': write the full IRI in <…> instead of "
            f"{slash.group(0)}"
        )
    message = f"syntax error at line {line}, column {col}: {exc.msg}"
    return dg.Diagnostic(
        dg.SYNTAX, message, source_line.strip() or None, suggestion, "error", line, col
    )


def _prefix_hint(message: str) -> str | None:
    if "prefix" in message.lower():
        return "declare every prefix you use, e.g. PREFIX oda: <https://w3id.org/oda-analyst/ontology#>"
    return None


def _get(node: Any, key: str) -> Any:
    # CompValue.get returns the key itself when it is missing; plain dict lookup does not.
    return dict.get(node, key) if isinstance(node, dict) else None


# Algebra -> pattern tree --------------------------------------------------------------------


def to_pattern(node: Any) -> Pattern:
    name = node.name
    if name == "BGP":
        return Bgp(tuple(Triple(s, p, o) for s, p, o in node["triples"]))
    if name == "Join":
        items: list[Pattern] = []
        for child in (to_pattern(node["p1"]), to_pattern(node["p2"])):
            items.extend(child.items if isinstance(child, Join) else (child,))
        return Join(tuple(items))
    if name == "LeftJoin":
        expr = _real_expr(_get(node, "expr"))
        return Optional(
            to_pattern(node["p1"]), to_pattern(node["p2"]), expr, tuple(exists_patterns(expr))
        )
    if name == "Union":
        branches: list[Pattern] = []
        for child in (to_pattern(node["p1"]), to_pattern(node["p2"])):
            branches.extend(child.branches if isinstance(child, Union) else (child,))
        return Union(tuple(branches))
    if name == "Minus":
        return Minus(to_pattern(node["p1"]), to_pattern(node["p2"]))
    if name == "Filter":
        expr = node["expr"]
        return Filter(expr, to_pattern(node["p"]), tuple(exists_patterns(expr)))
    if name == "Extend":
        expr = node["expr"]
        return Bind(node["var"], expr, to_pattern(node["p"]), tuple(exists_patterns(expr)))
    if name == "ToMultiSet":
        return to_pattern(node["p"])
    if name == "values":
        return _values(node["res"])
    if name == "Graph":
        return GraphP(node["term"], to_pattern(node["p"]))
    if name == "ServiceGraphPattern":
        return Service(node["term"], str(_get(node, "service_string") or "SERVICE"))
    if name == "Project":
        return Select(tuple(node["PV"]), to_pattern(node["p"]))
    if name in ("OrderBy", "Slice", "Distinct", "Reduced"):
        return to_pattern(node["p"])
    if name == "AggregateJoin":
        group = node["p"]
        aggs = tuple(
            Aggregate(a.name.removeprefix("Aggregate_"), a["res"], _get(a, "vars"))
            for a in node["A"]
        )
        return Aggregation(to_pattern(group["p"]), tuple(_get(group, "expr") or ()), aggs)
    if name == "Group":
        return Aggregation(to_pattern(node["p"]), tuple(_get(node, "expr") or ()), ())
    if name in ("SelectQuery", "AskQuery", "ConstructQuery", "DescribeQuery"):
        return to_pattern(node["p"])
    raise ValueError(f"unsupported SPARQL algebra node {name}")


def _values(rows: list[dict[Variable, Identifier]]) -> Values:
    variables: list[Variable] = []
    for row in rows:
        variables.extend(v for v in row if v not in variables)
    return Values(tuple(variables), tuple(tuple(row.get(v) for v in variables) for row in rows))


def _real_expr(expr: Any) -> Any:
    # rdflib puts a TrueFilter placeholder on OPTIONALs without a filter.
    if isinstance(expr, CompValue) and expr.name == "TrueFilter":
        return None
    return expr


def exists_patterns(expr: Any) -> Iterator[Pattern]:
    """Patterns of every EXISTS / NOT EXISTS inside an expression, translated to the tree."""
    if isinstance(expr, CompValue):
        if expr.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
            # rdflib stores the translated pattern as an attribute, leaving the item (whose
            # filters it has already removed) in place.
            graph = vars(expr).get("graph", expr["graph"])
            if isinstance(graph, CompValue) and graph.name == "GroupGraphPatternSub":
                graph = translateGroupGraphPattern(graph)
            yield to_pattern(graph)
            return
        for value in expr.values():
            yield from exists_patterns(value)
    elif isinstance(expr, list | tuple):
        for item in expr:
            yield from exists_patterns(item)


def expr_vars(expr: Any) -> Iterator[Variable]:
    """Variables an expression reads, not counting those inside EXISTS patterns."""
    if isinstance(expr, Variable):
        yield expr
    elif isinstance(expr, CompValue):
        if expr.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
            return
        for key, value in expr.items():
            if key != "_vars":
                yield from expr_vars(value)
    elif isinstance(expr, list | tuple):
        for item in expr:
            yield from expr_vars(item)


def is_expr(value: Any) -> bool:
    return isinstance(value, Expr | CompValue)


def term_key(term: Identifier) -> str:
    if isinstance(term, Variable):
        return "?" + str(term)
    if isinstance(term, BNode):
        return "_:" + str(term)
    if isinstance(term, URIRef):
        return "<" + str(term) + ">"
    return show_literal(term) if isinstance(term, Literal) else str(term)


def show_term(term: PathOrTerm, prefixes: dict[str, str]) -> str:
    """A term as a person would write it, prefixed where a declared prefix fits."""
    if isinstance(term, Path):
        return term.n3(None)
    if isinstance(term, URIRef):
        text = str(term)
        for prefix, ns in prefixes.items():
            local = text[len(ns) :]
            if text.startswith(ns) and local and re.fullmatch(r"[A-Za-z_][\w-]*", local):
                return f"{prefix}:{local}"
        return f"<{text}>"
    if isinstance(term, Variable):
        return "?" + str(term)
    if isinstance(term, BNode):
        return "[]"
    return show_literal(term) if isinstance(term, Literal) else str(term)


def show_triple(t: Triple, prefixes: dict[str, str]) -> str:
    p = "a" if t.p == RDF.type else show_term(t.p, prefixes)
    return f"{show_term(t.s, prefixes)} {p} {show_term(t.o, prefixes)} ."


def children(p: Pattern) -> Iterator[Pattern]:
    """Direct sub-patterns, including EXISTS patterns of filters and binds."""
    if isinstance(p, Join):
        yield from p.items
    elif isinstance(p, Optional):
        yield p.left
        yield p.right
        yield from p.exists
    elif isinstance(p, Union):
        yield from p.branches
    elif isinstance(p, Minus):
        yield p.left
        yield p.right
    elif isinstance(p, Filter | Bind):
        yield p.inner
        yield from p.exists
    elif isinstance(p, GraphP | Aggregation | Select):
        yield p.inner


def walk(p: Pattern) -> Iterator[Pattern]:
    yield p
    for child in children(p):
        yield from walk(child)
