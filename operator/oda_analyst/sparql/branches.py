"""Conjunctive branches of a pattern: what type inference checks one at a time.

A UNION splits a pattern into branches (one per combination of its members); OPTIONAL, MINUS
and EXISTS parts join their parent's branch; a sub-select is typed as its own scope and, in its
parent, contributes its triples (unprojected variables renamed) as context only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rdflib.term import Identifier, Variable

from oda_analyst.sparql.parse import (
    Aggregate,
    Aggregation,
    Bgp,
    Bind,
    Filter,
    GraphP,
    Join,
    Minus,
    Optional,
    Pattern,
    Select,
    Triple,
    Union,
    Values,
    walk,
)

MAX_BRANCHES = 64  # a cap on UNION combinations; real queries have a handful


@dataclass(frozen=True)
class Conj:
    """One conjunctive branch: its triples, filter expressions and bindings, in order."""

    triples: tuple[Triple, ...] = ()
    filters: tuple[object, ...] = ()
    binds: tuple[tuple[Variable, object], ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    values: tuple[Values, ...] = ()
    context: tuple[Triple, ...] = ()  # sub-select triples: they type its projected variables

    def __add__(self, other: Conj) -> Conj:
        return Conj(
            self.triples + other.triples,
            self.filters + other.filters,
            self.binds + other.binds,
            self.aggregates + other.aggregates,
            self.values + other.values,
            self.context + other.context,
        )


def _product(parts: list[list[Conj]]) -> list[Conj]:
    out = [Conj()]
    for options in parts:
        out = [a + b for a in out for b in options][:MAX_BRANCHES]
    return out


def branches(p: Pattern) -> list[Conj]:
    """Conjunctive branches of a pattern; sub-selects are separate scopes (typed on their own)."""
    if isinstance(p, Bgp):
        return [Conj(triples=p.triples)]
    if isinstance(p, Join):
        return _product([branches(i) for i in p.items])
    if isinstance(p, Optional):
        extra = [Conj(filters=(p.expr,))] if p.expr is not None else [Conj()]
        return _product([branches(p.left), branches(p.right), extra, *map(branches, p.exists)])
    if isinstance(p, Union):
        return [c for b in p.branches for c in branches(b)][:MAX_BRANCHES]
    if isinstance(p, Minus):
        return _product([branches(p.left), branches(p.right)])
    if isinstance(p, Filter):
        return _product([branches(p.inner), [Conj(filters=(p.expr,))], *map(branches, p.exists)])
    if isinstance(p, Bind):
        bind = [Conj(binds=((p.var, p.expr),))]
        return _product([branches(p.inner), *map(branches, p.exists), bind])
    if isinstance(p, Values):
        return [Conj(values=(p,))]
    if isinstance(p, GraphP):
        return branches(p.inner)
    if isinstance(p, Aggregation):
        return _product([branches(p.inner), [Conj(aggregates=p.aggregates)]])
    if isinstance(p, Select):  # checked as its own scope; here it only types what it projects
        return [Conj(context=_private(c.triples + c.context, p)) for c in branches(p.inner)]
    return [Conj()]  # Service (rejected anyway)


def _private(triples: tuple[Triple, ...], sub: Select) -> tuple[Triple, ...]:
    """Rename a sub-select's unprojected variables so they cannot meet the parent's."""
    suffix = f"__sub{id(sub)}"
    keep = set(sub.variables)

    def rename(term: Identifier) -> Identifier:
        return Variable(term + suffix) if isinstance(term, Variable) and term not in keep else term

    return tuple(Triple(rename(t.s), t.p, rename(t.o)) for t in triples)


def scopes(root: Pattern) -> Iterator[Pattern]:
    """The top pattern and the body of every sub-select: each is typed separately."""
    yield root.inner if isinstance(root, Select) else root
    for node in walk(root):
        if isinstance(node, Select) and node is not root:
            yield node.inner
