"""Checks that need no ontology: federation and foreign graphs, unbound variables, connectedness.

All three walk the pattern tree of ``parse.py``. Variable scoping follows SPARQL's bottom-up
evaluation: a FILTER sees the variables of its own group (an OPTIONAL's filter also the left
side), an EXISTS pattern also the variables of the enclosing group, a sub-select only its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rdflib.namespace import RDF
from rdflib.paths import Path
from rdflib.term import BNode, Identifier, Literal, URIRef, Variable

from oda_analyst.sparql import diagnostics as dg
from oda_analyst.sparql.parse import (
    Aggregation,
    Bgp,
    Bind,
    Filter,
    GraphP,
    Join,
    Minus,
    Optional,
    ParsedQuery,
    Pattern,
    Select,
    Service,
    Union,
    Values,
    expr_vars,
    show_term,
    show_triple,
    term_key,
    walk,
)

Prefixes = dict[str, str]


# Federation and graphs ----------------------------------------------------------------------


def check_dataset(
    query: ParsedQuery, allowed_graph: str | None, prefixes: Prefixes
) -> tuple[list[dg.Diagnostic], tuple[str, ...]]:
    """SERVICE anywhere, and FROM / FROM NAMED / GRAPH other than the request's own graph."""
    diags: list[dg.Diagnostic] = []
    graphs: list[str] = []
    allowed = f"<{allowed_graph}>" if allowed_graph else None
    hint = (
        f"query only the request's graph: FROM {allowed}"
        if allowed
        else ("remove the clause: the executor chooses the request's graph")
    )
    for clause, iri in query.dataset:
        graphs.append(iri)
        if iri != allowed_graph:
            diags.append(
                dg.Diagnostic(
                    dg.GRAPH_FORBIDDEN,
                    f"{clause} <{iri}> names a graph this request may not read",
                    f"{clause} <{iri}>",
                    hint,
                )
            )
    for node in _all_patterns(query.root):
        if isinstance(node, Service):
            diags.append(
                dg.Diagnostic(
                    dg.SERVICE_FORBIDDEN,
                    f"SERVICE {show_term(node.term, prefixes)} would federate to another endpoint",
                    _clip(node.text),
                    "remove the SERVICE clause: only the request's graph is queried",
                )
            )
        elif isinstance(node, GraphP):
            term = node.term
            if isinstance(term, URIRef):
                graphs.append(str(term))
            if not (isinstance(term, URIRef) and str(term) == allowed_graph):
                what = "ranges over every graph" if isinstance(term, Variable) else "is not allowed"
                diags.append(
                    dg.Diagnostic(
                        dg.GRAPH_FORBIDDEN,
                        f"GRAPH {show_term(term, prefixes)} {what}",
                        f"GRAPH {show_term(term, prefixes)} {{ … }}",
                        hint,
                    )
                )
    return diags, tuple(dict.fromkeys(graphs))


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _all_patterns(root: Pattern) -> Iterator[Pattern]:
    yield from walk(root)


# Bound variables ----------------------------------------------------------------------------


def visible(p: Pattern) -> frozenset[Variable]:
    """Variables a pattern may bind, as its parent sees them."""
    if isinstance(p, Bgp):
        out: set[Variable] = set()
        for t in p.triples:
            out.update(x for x in (t.s, t.p, t.o) if isinstance(x, Variable))
        return frozenset(out)
    if isinstance(p, Join):
        return frozenset().union(*(visible(i) for i in p.items))
    if isinstance(p, Optional):
        return visible(p.left) | visible(p.right)
    if isinstance(p, Union):
        return frozenset().union(*(visible(b) for b in p.branches))
    if isinstance(p, Minus | Filter):
        return visible(p.left if isinstance(p, Minus) else p.inner)
    if isinstance(p, Bind):
        return visible(p.inner) | {p.var}
    if isinstance(p, Values):
        return frozenset(p.variables)
    if isinstance(p, GraphP):
        return visible(p.inner) | ({p.term} if isinstance(p.term, Variable) else set())
    if isinstance(p, Service):  # its pattern is not translated; its variables still bind
        return frozenset(Variable(v) for v in re.findall(r"[?$](\w+)", p.text))
    if isinstance(p, Aggregation):
        keys = {g for g in p.group_by if isinstance(g, Variable)}
        return frozenset(keys | {a.res for a in p.aggregates})
    return frozenset(p.variables)  # Select


def check_scope(root: Pattern, template_vars: Iterable[Variable] = ()) -> list[dg.Diagnostic]:
    """Projected, aggregated, filtered and bound-expression variables that nothing binds."""
    diags: list[dg.Diagnostic] = []
    inner_vars = visible(root.inner) if isinstance(root, Select) else visible(root)
    for var in template_vars:
        if var not in inner_vars:
            diags.append(_unbound_projection(var, "the CONSTRUCT template uses"))
    _scope(root, frozenset(), diags)
    return diags


def _unbound_projection(var: Variable, what: str) -> dg.Diagnostic:
    return dg.Diagnostic(
        dg.UNBOUND_PROJECTION,
        f"{what} ?{var}, which no triple pattern, BIND, VALUES or aggregate binds",
        f"?{var}",
        f"bind ?{var} in the WHERE clause or drop it from the projection",
    )


def _scope(p: Pattern, outer: frozenset[Variable], diags: list[dg.Diagnostic]) -> None:
    if isinstance(p, Select):
        inner = visible(p.inner)
        for var in p.variables:
            if var not in inner and not _internal(var):
                diags.append(_unbound_projection(var, "the query projects"))
        _projection_binds(p, diags)
        _scope(p.inner, frozenset(), diags)
        return
    if isinstance(p, Filter):
        seen = visible(p.inner) | outer
        for var in dict.fromkeys(expr_vars(p.expr)):
            if var not in seen:
                diags.append(
                    dg.Diagnostic(
                        dg.UNBOUND_FILTER_VARIABLE,
                        f"the FILTER reads ?{var}, which is not bound in its group",
                        f"FILTER … ?{var} …",
                        f"bind ?{var} in the same group as the FILTER, or fix its name",
                    )
                )
        for ex in p.exists:
            _scope(ex, seen, diags)
        _scope(p.inner, outer, diags)
        return
    if isinstance(p, Optional):
        seen = visible(p.left) | visible(p.right) | outer
        for var in dict.fromkeys(expr_vars(p.expr)) if p.expr is not None else ():
            if var not in seen:
                diags.append(
                    dg.Diagnostic(
                        dg.UNBOUND_FILTER_VARIABLE,
                        f"the FILTER inside OPTIONAL reads ?{var}, which is never bound",
                        f"FILTER … ?{var} …",
                        f"bind ?{var} or fix its name",
                    )
                )
        for ex in p.exists:
            _scope(ex, seen, diags)
        _scope(p.left, outer, diags)
        _scope(p.right, outer, diags)
        return
    if isinstance(p, Aggregation):
        seen = visible(p.inner) | outer
        for agg in p.aggregates:
            if agg.arg == "*" or agg.arg is None:
                continue
            for var in dict.fromkeys(expr_vars(agg.arg)):
                if var not in seen and not _internal(var):
                    diags.append(
                        _unbound_projection(var, f"the aggregate {agg.name.upper()} reads")
                    )
        _scope(p.inner, outer, diags)
        return
    if isinstance(p, Bind):
        seen = visible(p.inner) | outer
        for var in dict.fromkeys(expr_vars(p.expr)):
            if var not in seen and not _internal(var):
                diags.append(
                    dg.Diagnostic(
                        dg.UNBOUND_BIND_VARIABLE,
                        f"the expression bound to ?{p.var} reads ?{var}, which is not bound "
                        "before it",
                        f"BIND(… ?{var} … AS ?{p.var})",
                        f"bind ?{var} earlier in the group, or fix its name",
                        severity="warning",
                    )
                )
        for ex in p.exists:
            _scope(ex, seen, diags)
        _scope(p.inner, outer, diags)
        return
    for child in _pattern_children(p):
        _scope(child, outer, diags)


def _projection_binds(select: Select, diags: list[dg.Diagnostic]) -> None:
    """``(expr AS ?x)`` of the projection: an unbound input makes the output unbound too.

    The algebra cannot tell a projection expression from a BIND ending the WHERE clause; both
    are Extend nodes under the projection. One whose variable is projected is checked here.
    """
    p = select.inner
    while isinstance(p, Bind | Filter):
        if isinstance(p, Bind) and p.var in select.variables:
            seen = visible(p.inner)
            for var in dict.fromkeys(expr_vars(p.expr)):
                if var not in seen and not _internal(var):
                    diags.append(_unbound_projection(var, f"the expression for ?{p.var} reads"))
        p = p.inner


def _internal(var: Variable) -> bool:
    # rdflib names aggregate results __agg_<n>__
    return str(var).startswith("__agg_")


def _pattern_children(p: Pattern) -> Iterator[Pattern]:
    if isinstance(p, Join):
        yield from p.items
    elif isinstance(p, Union):
        yield from p.branches
    elif isinstance(p, Minus):
        yield p.left
        yield p.right
    elif isinstance(p, GraphP):
        yield p.inner


# Connectedness ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    keys: frozenset[str]
    text: str


def check_connected(root: Pattern, prefixes: Prefixes) -> list[dg.Diagnostic]:
    """Each group's triple patterns must form one connected graph over shared terms."""
    diags: list[dg.Diagnostic] = []
    _group(root, prefixes, diags)
    return diags


def _group(p: Pattern, prefixes: Prefixes, diags: list[dg.Diagnostic]) -> list[_Atom]:
    """Check one group and return its atoms; sub-groups are checked on their own."""
    atoms = _atoms(p, prefixes, diags)
    parts = _components(atoms)
    if len(parts) > 1:
        shown = " | ".join("{ " + " ".join(a.text for a in part) + " }" for part in parts)
        diags.append(
            dg.Diagnostic(
                dg.DISCONNECTED_PATTERN,
                f"the graph pattern falls into {len(parts)} parts that share no variable or IRI; "
                "the result would be their cross product",
                shown,
                "join the parts through a shared variable (e.g. ?node oda:hasSensor ?sensor), "
                "or ask them as separate queries",
            )
        )
    return atoms


def _atoms(p: Pattern, prefixes: Prefixes, diags: list[dg.Diagnostic]) -> list[_Atom]:
    if isinstance(p, Bgp):
        return [_Atom(_triple_keys(t.s, t.p, t.o), show_triple(t, prefixes)) for t in p.triples]
    if isinstance(p, Join):
        return [a for item in p.items for a in _atoms(item, prefixes, diags)]
    if isinstance(p, Optional):
        for ex in p.exists:
            _group(ex, prefixes, diags)
        return _atoms(p.left, prefixes, diags) + _atoms(p.right, prefixes, diags)
    if isinstance(p, Filter | Bind):
        for ex in p.exists:
            _group(ex, prefixes, diags)
        return _atoms(p.inner, prefixes, diags)
    if isinstance(p, Union):
        keys: set[str] = set()
        for branch in p.branches:
            for atom in _group(branch, prefixes, diags):
                keys |= atom.keys
        return [_Atom(frozenset(keys), "{ … } UNION { … }")] if keys else []
    if isinstance(p, Minus):
        right = _group(p.right, prefixes, diags)
        shared = frozenset().union(*(a.keys for a in right)) if right else frozenset()
        minus = [_Atom(shared, "MINUS { … }")] if shared else []
        return _atoms(p.left, prefixes, diags) + minus
    if isinstance(p, GraphP | Aggregation):
        return _atoms(p.inner, prefixes, diags)
    if isinstance(p, Select):
        _group(p.inner, prefixes, diags)
        projected = frozenset(term_key(v) for v in p.variables)
        return [_Atom(projected, "{ SELECT … }")] if projected else []
    return []  # Values, Service


def _triple_keys(s: Identifier, p: Identifier | Path, o: Identifier) -> frozenset[str]:
    keys = {term_key(s)} if _joins(s) else set()
    if isinstance(p, Variable):
        keys.add(term_key(p))
    # The class of rdf:type is shared by unrelated entities: it does not join them.
    if _joins(o) and p != RDF.type:
        keys.add(term_key(o))
    return frozenset(keys)


def _joins(term: Identifier) -> bool:
    return isinstance(term, Variable | BNode | URIRef) and not isinstance(term, Literal)


def _components(atoms: list[_Atom]) -> list[list[_Atom]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for atom in atoms:
        keys = sorted(atom.keys)
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
    groups: dict[str, list[_Atom]] = {}
    for index, atom in enumerate(atoms):
        root = find(min(atom.keys)) if atom.keys else f"#{index}"
        groups.setdefault(root, []).append(atom)
    return sorted(groups.values(), key=len, reverse=True)
