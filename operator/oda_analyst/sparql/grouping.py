"""The grouping rule (SPARQL 1.1 §11.4): a grouped query may only read grouped variables.

In a query with GROUP BY or an aggregate, each projected variable, and each variable a projection
expression, HAVING or ORDER BY reads outside an aggregate, must be a grouping key: a plain
``GROUP BY ?x`` or a named ``GROUP BY (expr AS ?x)``. Oxigraph rejects a projection that breaks
the rule; in HAVING or ORDER BY such a variable is unbound, so HAVING drops every group and ORDER
BY orders nothing. rdflib's algebra silently wraps these variables in SAMPLE, so the rule is
checked on the parse tree, before ``translateQuery`` rewrites (and mutates) it:
``grouped_queries`` reads each grouping query level there, ``check_grouping`` judges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyparsing import ParseResults
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from oda_analyst.sparql import diagnostics as dg

_EXISTS = ("Builtin_EXISTS", "Builtin_NOTEXISTS")
_FORMS = {"SelectQuery": "SELECT", "SubSelect": "SELECT", "AskQuery": "ASK"}
_FORMS |= {"ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}


@dataclass(frozen=True)
class Projected:
    """One projection item: ``?x``, or ``(expr AS ?x)`` with the variables it reads."""

    var: Variable
    reads: tuple[Variable, ...]  # outside aggregates and EXISTS; a plain ?x reads itself
    expression: bool


@dataclass(frozen=True)
class GroupedQuery:
    """A query level (the query or a sub-select) that groups, as its parse tree reads."""

    form: str  # SELECT, ASK, CONSTRUCT, DESCRIBE
    sub_select: bool
    explicit: bool  # GROUP BY; otherwise an aggregate makes all solutions one group
    keys: tuple[Variable, ...]
    expression_keys: tuple[Variable, ...]  # read by GROUP BY expressions that have no name
    projection: tuple[Projected, ...] | None  # None: every variable (SELECT *, ASK, ...)
    having: tuple[Variable, ...]  # read outside aggregates
    order_by: tuple[Variable, ...]  # read outside aggregates
    every: tuple[Variable, ...] = ()  # with no projection: the variables of the pattern


# Parse tree -> grouped query levels ----------------------------------------------------------


def grouped_queries(tree: Any) -> tuple[GroupedQuery, ...]:
    """Every level of a parsed query (rdflib's parse tree) that groups, outermost first."""
    query = tree[-1] if isinstance(tree, ParseResults | list) else tree
    return tuple(_levels(query, sub_select=False))


def _levels(query: CompValue, *, sub_select: bool) -> Iterator[GroupedQuery]:
    level = _level(query, sub_select)
    if level is not None:
        yield level
    for sub in _sub_selects(_get(query, "where")):
        yield from _levels(sub, sub_select=True)


def _level(query: CompValue, sub_select: bool) -> GroupedQuery | None:
    items = _get(query, "projection")
    having = _conditions(_get(query, "having"))
    order_by = _conditions(_get(query, "orderby"))
    group_by = _conditions(_get(query, "groupby"))
    expressions = [_get(item, "expr") for item in items or ()]
    explicit = bool(group_by)
    if not explicit and not any(_has_aggregate(x) for x in (*expressions, having, order_by)):
        return None
    keys: list[Variable] = []
    expression_keys: list[Variable] = []
    for cond in group_by:
        key = _key(cond)
        if key is not None:
            keys.append(key)
        else:
            expression_keys.extend(_free_vars(cond))
    form = _FORMS.get(query.name, "SELECT")
    projection: tuple[Projected, ...] | None = None
    if items:
        projection = tuple(_projected(item) for item in items)
    elif form == "DESCRIBE" and _get(query, "var") is not None:  # DESCRIBE * has no var list
        described = [v for v in _get(query, "var") if isinstance(v, Variable)]
        projection = tuple(Projected(v, (v,), False) for v in described)
    return GroupedQuery(
        form,
        sub_select,
        explicit,
        tuple(dict.fromkeys(keys)),
        tuple(dict.fromkeys(expression_keys)),
        projection,
        tuple(dict.fromkeys(_free_vars(having))),
        tuple(dict.fromkeys(_free_vars(order_by))),
        tuple(dict.fromkeys(_all_vars(_get(query, "where")))) if projection is None else (),
    )


def _projected(item: CompValue) -> Projected:
    var = _get(item, "var")
    if var is not None:
        return Projected(var, (var,), False)
    return Projected(_get(item, "evar"), tuple(dict.fromkeys(_free_vars(item["expr"]))), True)


def _key(cond: Any) -> Variable | None:
    """The variable a GROUP BY condition groups by: ``?x``, ``(expr AS ?x)`` or ``(?x)``."""
    if isinstance(cond, Variable):
        return cond
    if isinstance(cond, CompValue) and cond.name == "GroupAs":
        named = _get(cond, "var")
        return named if named is not None else _bare_variable(_get(cond, "expr"))
    return None


def _bare_variable(expr: Any) -> Variable | None:
    # rdflib wraps a bracketed ?x in a chain of one-operand expressions.
    while isinstance(expr, CompValue) and list(expr) == ["expr"]:
        expr = expr["expr"]
    return expr if isinstance(expr, Variable) else None


def _conditions(clause: Any) -> list[Any]:
    return list(_get(clause, "condition") or ()) if clause is not None else []


def _get(node: Any, key: str) -> Any:
    # CompValue.get returns the key itself when it is missing; plain dict lookup does not.
    return dict.get(node, key) if isinstance(node, dict) else None


def _children(node: Any) -> Iterable[Any]:
    if isinstance(node, dict):
        return dict.values(node)
    if isinstance(node, ParseResults | list | tuple):
        return node
    return ()


def _sub_selects(node: Any) -> Iterator[CompValue]:
    """The sub-selects directly inside a pattern (not those inside another sub-select)."""
    if isinstance(node, CompValue) and node.name == "SubSelect":
        yield node
        return
    for child in _children(node):
        yield from _sub_selects(child)


def _free_vars(node: Any) -> Iterator[Variable]:
    """Variables an expression reads outside aggregates and EXISTS patterns."""
    if isinstance(node, Variable):
        yield node
        return
    if isinstance(node, CompValue) and (node.name.startswith("Aggregate_") or node.name in _EXISTS):
        return
    for child in _children(node):
        yield from _free_vars(child)


def _all_vars(node: Any) -> Iterator[Variable]:
    if isinstance(node, Variable):
        yield node
    for child in _children(node):
        yield from _all_vars(child)


def _has_aggregate(node: Any) -> bool:
    if isinstance(node, CompValue):
        if node.name.startswith("Aggregate_"):
            return True
        if node.name in _EXISTS:
            return False
    return any(_has_aggregate(child) for child in _children(node))


# The rule -------------------------------------------------------------------------------------


def check_grouping(levels: Iterable[GroupedQuery]) -> list[dg.Diagnostic]:
    """Variables a grouped query reads that are neither grouping keys nor inside an aggregate."""
    diags: list[dg.Diagnostic] = []
    for q in levels:
        diags.extend(_check_level(q))
    return diags


def explained_unbound(levels: Iterable[GroupedQuery]) -> frozenset[Variable]:
    """Variables that look unbound in rdflib's algebra only because a level groups wrongly.

    rdflib wraps what a grouped level reads in SAMPLE: an alias read by the projection or HAVING
    then looks unbound, and so does every variable of a SELECT * (ASK, CONSTRUCT) that groups.
    The grouping diagnostic names the cause; the validator drops those unbound reports.
    """
    out: set[Variable] = set()
    for q in levels:
        out.update(q.every)
        if q.projection is not None:
            aliases = {p.var for p in q.projection if p.expression}
            reads = [v for p in q.projection if p.expression for v in p.reads]
            out.update(v for v in (*reads, *q.having) if v in aliases and v not in q.keys)
    return frozenset(out)


def _check_level(q: GroupedQuery) -> Iterator[dg.Diagnostic]:
    what = "the sub-select" if q.sub_select else "the query"
    how = (
        f"groups by {_vars(q.keys)}"
        if q.explicit and q.keys
        else "groups"
        if q.explicit
        else "aggregates without GROUP BY (all solutions form one group)"
    )
    if q.form in ("ASK", "CONSTRUCT"):
        yield _diag(
            f"{what} ({q.form}) {how}: all its pattern's variables are in scope, as with "
            "SELECT *, which SPARQL does not allow with grouping (Oxigraph rejects it)",
            f"{q.form} … GROUP BY" if q.explicit else q.form,
            "group inside a sub-select, { SELECT ?key (COUNT(*) AS ?n) WHERE { … } GROUP BY "
            "?key }, and use ?key and ?n outside it",
        )
        return
    if q.projection is None:
        yield _diag(
            f"{what} {how} but projects every variable ({q.form} *), which SPARQL does not "
            "allow with grouping",
            f"{q.form} *",
            "project the grouped variables and aggregates, e.g. SELECT ?key (COUNT(*) AS ?n)",
        )
        return
    aliases = {p.var for p in q.projection if p.expression}
    keys = set(q.keys)
    for item in q.projection:
        for var in item.reads:
            if var in keys:
                continue
            if not item.expression:
                yield _diag(
                    f"{what} {how} but projects ?{var}, which is neither grouped nor inside an "
                    "aggregate (Oxigraph rejects the query)",
                    f"SELECT … ?{var} …",
                    _suggest(q, var),
                )
            elif var in aliases:
                yield _diag(
                    f"in {what}, which {how}, the expression for ?{item.var} reads ?{var}, an "
                    "alias of the same projection: a grouped projection may read only grouped "
                    "variables and aggregates (Oxigraph rejects the query)",
                    f"(… ?{var} … AS ?{item.var})",
                    f"repeat the aggregate expression of ?{var} instead of its alias",
                )
            else:
                yield _diag(
                    f"in {what}, which {how}, the expression for ?{item.var} reads ?{var}, "
                    "which is neither grouped nor inside an aggregate (Oxigraph rejects the "
                    "query)",
                    f"(… ?{var} … AS ?{item.var})",
                    _suggest(q, var),
                )
    for var in q.having:
        if var not in keys:
            alias = var in aliases
            yield _diag(
                f"the HAVING of {what}, which {how}, reads ?{var}, "
                + (
                    "an alias the projection binds only after HAVING"
                    if alias
                    else "which is neither grouped nor inside an aggregate"
                )
                + ": it is unbound there, so HAVING drops every group",
                f"HAVING (… ?{var} …)",
                "repeat the aggregate expression instead of the alias, e.g. HAVING (AVG(?v) > 1)"
                if alias
                else _suggest(q, var, "read it inside an aggregate, e.g. SAMPLE(?{var})"),
            )
    for var in q.order_by:
        if var not in keys and var not in aliases:
            yield _diag(
                f"the ORDER BY of {what}, which {how}, reads ?{var}, which is neither grouped, "
                "a projected alias nor inside an aggregate: it is unbound after grouping and "
                "orders nothing",
                f"ORDER BY … ?{var} …",
                _suggest(q, var, "order by an aggregate, e.g. DESC(MAX(?{var})), or an alias"),
            )


def _suggest(q: GroupedQuery, var: Variable, other: str | None = None) -> str:
    if var in q.expression_keys:
        return (
            f"name the GROUP BY expression that reads ?{var}, GROUP BY (… AS ?name), "
            "and read ?name instead"
        )
    group = f"add ?{var} to GROUP BY" if q.explicit else f"add GROUP BY ?{var}"
    alternative = other or "wrap it in an aggregate such as (SAMPLE(?{var}) AS ?{var}_sample)"
    return f"{group}, or {alternative.format(var=var)}"


def _diag(message: str, pattern: str, suggestion: str) -> dg.Diagnostic:
    return dg.Diagnostic(dg.UNGROUPED_PROJECTION, message, pattern, suggestion)


def _vars(variables: Iterable[Variable]) -> str:
    return " ".join(f"?{v}" for v in variables)
