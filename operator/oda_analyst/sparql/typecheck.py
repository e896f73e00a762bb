"""Ontology conformance of triple patterns and filters, by type inference.

The pattern is expanded into its conjunctive branches (one per combination of UNION branches;
OPTIONAL, MINUS and EXISTS parts are joined to their parent). In each branch every term collects
class constraints: ``rdf:type``, the class its IRI names (``m100:node/900`` is a ComputeNode),
VALUES rows, the domain of each property it is the subject of and the range of each object
property it is the object of. Constraints are sets of classes (a union range is one constraint).
Two constraints conflict when the ontology makes them disjoint; conflicts are resolved by
dropping the constraint that conflicts most (the weaker kind first, then the later one), and each
dropped constraint is one diagnostic at its own triple. Literal/resource use and datatype
families (objects of data properties, FILTER comparisons) are checked the same way.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from rdflib.namespace import RDF
from rdflib.paths import AlternativePath, InvPath, MulPath, Path, SequencePath
from rdflib.term import BNode, Identifier, Literal, URIRef, Variable

from oda_analyst.ontology.model import OntologyModel, OntProperty
from oda_analyst.ontology.namespaces import INSTANCE_NS, ONTOLOGY_NS
from oda_analyst.sparql import diagnostics as dg
from oda_analyst.sparql import literals as lt
from oda_analyst.sparql import vocab
from oda_analyst.sparql.branches import Conj, branches, scopes
from oda_analyst.sparql.parse import (
    Pattern,
    Triple,
    Values,
    show_term,
    show_triple,
    term_key,
)

_Add = Callable[[Identifier, "_Constraint"], None]
_Unknown = list[tuple[str, Identifier, str, str]]  # property IRI, subject, triple, message
_RANK = {"iri": 0, "type": 1, "values": 1, "domain": 2, "range": 2}


@dataclass
class _Constraint:
    classes: frozenset[str]
    role: str  # iri | type | values | domain | range
    order: int
    where: str  # the triple or clause it comes from
    prop: OntProperty | None = None
    context: bool = False  # from a sub-select: informs, is never blamed here


@dataclass
class _Edge:
    """A triple after property paths are expanded; ``props`` > 1 for an alternative path."""

    s: Identifier
    o: Identifier
    props: tuple[OntProperty, ...]
    text: str
    predicate: str


@dataclass
class _Use:
    # (family, where, property name, from a sub-select)
    literal: list[tuple[str | None, str, str, bool]] = field(default_factory=list)
    resource: list[tuple[str, bool]] = field(default_factory=list)  # (where, from a sub-select)


class TypeChecker:
    """Checks one parsed query against the ontology; cheap to build, holds no query state."""

    def __init__(self, model: OntologyModel, prefixes: dict[str, str]) -> None:
        self.model = model
        self.prefixes = prefixes

    # -- entry -------------------------------------------------------------------------------

    def check(self, root: Pattern, template: tuple[Triple, ...] = ()) -> list[dg.Diagnostic]:
        diags: list[dg.Diagnostic] = []
        for scope in scopes(root):
            for conj in branches(scope):
                diags.extend(self._check_branch(conj))
        unknown: _Unknown = []
        for t in template:  # CONSTRUCT templates: names only
            if t.p == RDF.type:
                self._rdf_type(t, show_triple(t, self.prefixes), diags)
            else:
                self._expand(t.s, t.p, t.o, show_triple(t, self.prefixes), unknown)
        for prop_iri, _, where, message in unknown:
            near = vocab.or_list(vocab.suggest_property(self.model, prop_iri))
            diags.append(dg.Diagnostic(dg.UNKNOWN_PROPERTY, message, where, near))
        return diags

    # -- one conjunctive branch ---------------------------------------------------------------

    def _check_branch(self, conj: Conj) -> list[dg.Diagnostic]:
        diags: list[dg.Diagnostic] = []
        constraints: dict[str, list[_Constraint]] = {}
        uses: dict[str, _Use] = {}
        terms: dict[str, Identifier] = {}
        edges: list[tuple[_Edge, bool]] = []
        unknown: list[tuple[str, Identifier, str, str]] = []
        counter = itertools.count()
        ctx = False

        def add(term: Identifier, c: _Constraint) -> None:
            key = term_key(term)
            terms[key] = term
            c.context = ctx
            constraints.setdefault(key, []).append(c)

        # Sub-select triples first, as context: their problems were reported in their scope.
        for ctx, triples in ((True, conj.context), (False, conj.triples)):
            sink: list[dg.Diagnostic] = [] if ctx else diags
            for t in triples:
                text = show_triple(t, self.prefixes)
                for term in (t.s, t.o):
                    if isinstance(term, URIRef) and not (t.p == RDF.type and term is t.o):
                        sink.extend(self._entity(term, text, add, next(counter)))
                if t.p == RDF.type:
                    cls = self._rdf_type(t, text, sink)
                    if cls is not None:
                        add(t.s, _Constraint(frozenset({cls}), "type", next(counter), text))
                        self._use(uses, t.s).resource.append((text, ctx))
                    continue
                found = self._expand(t.s, t.p, t.o, text, [] if ctx else unknown)
                edges.extend((e, ctx) for e in found)
        ctx = False
        for v in conj.values:
            self._values(v, add, next(counter), uses)
        for e, ctx in edges:
            self._edge(e, add, uses, counter, [] if ctx else diags, ctx)
        ctx = False
        clashes, live = self._resolve(constraints, terms)
        diags.extend(clashes)
        for prop_iri, subject, where, message in unknown:
            known = [c.classes for c in live.get(term_key(subject), [])]
            near = vocab.suggest_property(self.model, prop_iri, subject=known)
            diags.append(dg.Diagnostic(dg.UNKNOWN_PROPERTY, message, where, vocab.or_list(near)))
        env = self._literal_uses(uses, terms, diags)
        self._filters(conj, env, uses, diags)
        return diags

    @staticmethod
    def _use(uses: dict[str, _Use], term: Identifier) -> _Use:
        return uses.setdefault(term_key(term), _Use())

    def _entity(self, iri: URIRef, where: str, add: _Add, order: int) -> list[dg.Diagnostic]:
        text = str(iri)
        if text.startswith(INSTANCE_NS):
            cls, problem = vocab.instance_class(text)
            if cls is not None and self.model.find_class(cls) is not None:
                add(iri, _Constraint(frozenset({cls}), "iri", order, f"<{text}>"))
                return []
            return [
                dg.Diagnostic(
                    dg.UNKNOWN_ENTITY,
                    f"<{text}>: {problem}",
                    where,
                    f"build instance IRIs as m100:<kind>/<id>, e.g. <{INSTANCE_NS}node/900>",
                )
            ]
        if text.startswith(ONTOLOGY_NS):
            found = self.model.find_class(text)
            hint = (
                f"to select instances write ?x a {vocab.qname(text)}"
                if found
                else "instances live in the m100: namespace"
            )
            return [
                dg.Diagnostic(
                    dg.UNKNOWN_ENTITY,
                    f"{vocab.qname(text)} is an ontology term, not an instance",
                    where,
                    hint,
                )
            ]
        return [
            dg.Diagnostic(
                dg.UNKNOWN_ENTITY,
                f"<{text}> is not an entity of the M100 graph",
                where,
                f"instance IRIs start with {INSTANCE_NS}",
            )
        ]

    def _rdf_type(self, t: Triple, where: str, diags: list[dg.Diagnostic]) -> str | None:
        o = t.o
        if isinstance(o, Variable | BNode):
            return None
        if not isinstance(o, URIRef):
            diags.append(
                dg.Diagnostic(
                    dg.UNKNOWN_CLASS,
                    f"rdf:type needs a class IRI, not {show_term(o, self.prefixes)}",
                    where,
                    None,
                )
            )
            return None
        cls = self.model.find_class(str(o)) if str(o).startswith(ONTOLOGY_NS) else None
        if cls is not None:
            return cls.iri
        as_prop = self.model.find_property(str(o)) if str(o).startswith(ONTOLOGY_NS) else None
        what = "a property, not a class" if as_prop else "not a class of the ontology"
        near = vocab.suggest_class(self.model, str(o))
        diags.append(
            dg.Diagnostic(
                dg.UNKNOWN_CLASS,
                f"{show_term(o, self.prefixes)} is {what}",
                where,
                vocab.or_list(near),
            )
        )
        return None

    def _values(self, v: Values, add: _Add, order: int, uses: dict[str, _Use]) -> None:
        """VALUES rows type their variable: entities by their IRIs, literals by datatype."""
        for i, var in enumerate(v.variables):
            column = [row[i] for row in v.rows if row[i] is not None]
            where = f"VALUES ?{var}"
            if column and all(isinstance(x, Literal) for x in column):
                families = {lt.expr_family(x, {}) for x in column}
                if len(families) == 1:
                    self._use(uses, var).literal.append((families.pop(), where, where, False))
                continue
            if not column or not all(isinstance(x, URIRef) for x in column):
                continue
            self._use(uses, var).resource.append((where, False))
            classes = {vocab.instance_class(str(x))[0] for x in column}
            if None not in classes:
                add(
                    var,
                    _Constraint(
                        frozenset(c for c in classes if c), "values", order, f"VALUES ?{var}"
                    ),
                )

    # -- predicates and paths -----------------------------------------------------------------

    def _expand(
        self, s: Identifier, p: Identifier | Path, o: Identifier, text: str, unknown: _Unknown
    ) -> list[_Edge]:
        if isinstance(p, Variable):
            return []
        if isinstance(p, URIRef):
            if str(p) in vocab.STRING_PREDICATES:  # rdfs:label / rdfs:comment: string values
                return [_Edge(s, o, (), text, str(p))]
            prop = self._property(p, s, text, unknown)
            return [_Edge(s, o, (prop,), text, str(p))] if prop is not None else []
        if isinstance(p, InvPath):
            return self._expand(o, p.arg, s, text, unknown)
        if isinstance(p, SequencePath):
            out: list[_Edge] = []
            nodes = [s, *(BNode() for _ in p.args[:-1]), o]
            for i, step in enumerate(p.args):
                out.extend(self._expand(nodes[i], step, nodes[i + 1], text, unknown))
            return out
        if isinstance(p, MulPath):
            inner = self._expand(s, p.path, o, text, unknown)
            # p* and p? also match zero steps (s = o): their ends carry no constraint then.
            return inner if p.mod == "+" else []
        if isinstance(p, AlternativePath):
            alts = [self._expand(s, a, o, text, unknown) for a in p.args]
            if all(len(a) == 1 for a in alts):
                props = tuple(pr for a in alts for pr in a[0].props)
                return [_Edge(s, o, props, text, "|".join(a[0].predicate for a in alts))]
            return []
        for iri in _path_iris(p):  # negated paths: names only
            self._property(iri, s, text, unknown)
        return []

    def _property(
        self, p: URIRef, s: Identifier, where: str, unknown: _Unknown
    ) -> OntProperty | None:
        """The ontology property ``p`` names; unknown names are queued for a suggestion."""
        iri = str(p)
        if iri in vocab.ALLOWED_PREDICATES:
            return None
        prop = self.model.find_property(iri) if iri.startswith(ONTOLOGY_NS) else None
        if prop is not None:
            return prop
        if iri.startswith(ONTOLOGY_NS) and self.model.find_class(iri) is not None:
            message = f"{vocab.qname(iri)} is a class, not a property"
        elif iri.startswith(ONTOLOGY_NS):
            message = f"{vocab.qname(iri)} is not a property of the ontology"
        else:
            message = f"{show_term(p, self.prefixes)} is not part of the query vocabulary"
        unknown.append((iri, s, where, message))
        return None

    def _edge(
        self,
        e: _Edge,
        add: _Add,
        uses: dict[str, _Use],
        counter: itertools.count[int],
        diags: list[dg.Diagnostic],
        ctx: bool = False,
    ) -> None:
        if not e.props:  # rdfs:label / rdfs:comment
            self._use(uses, e.s).resource.append((e.text, ctx))
            self._object_literal(e, None, uses, diags, ctx)
            return
        domain = frozenset().union(*(p.domain for p in e.props))
        kinds = {p.kind for p in e.props}
        if not isinstance(e.s, Literal):
            add(e.s, _Constraint(domain, "domain", next(counter), e.text, e.props[0]))
            self._use(uses, e.s).resource.append((e.text, ctx))
        else:
            diags.append(
                dg.Diagnostic(
                    dg.DOMAIN_VIOLATION,
                    f"a literal cannot be the subject of {vocab.qname(e.predicate)}",
                    e.text,
                    None,
                )
            )
        if kinds == {"object"}:
            rng = frozenset().union(*(p.range for p in e.props))
            if isinstance(e.o, Literal):
                diags.append(
                    dg.Diagnostic(
                        dg.RANGE_VIOLATION,
                        f"{vocab.qname(e.predicate)} is an object property: its object must be "
                        f"an entity ({vocab.show_classes(rng)}), not the literal "
                        f"{lt.show_literal(e.o)}",
                        e.text,
                        self._data_alternative(e),
                    )
                )
                return
            add(e.o, _Constraint(rng, "range", next(counter), e.text, e.props[0]))
            self._use(uses, e.o).resource.append((e.text, ctx))
        elif kinds == {"data"}:
            self._object_literal(e, e.props[0], uses, diags, ctx)

    def _data_alternative(self, e: _Edge) -> str | None:
        near = vocab.suggest_property(self.model, e.predicate, kind="data", exclude=e.predicate)
        return vocab.or_list(near[:2])

    def _object_literal(
        self,
        e: _Edge,
        prop: OntProperty | None,
        uses: dict[str, _Use],
        diags: list[dg.Diagnostic],
        ctx: bool = False,
    ) -> None:
        datatype = prop.datatype if prop is not None else None
        family = lt.datatype_family(datatype) if prop is not None else lt.STRING
        name = (
            vocab.qname(e.predicate)
            if prop is not None
            else show_term(URIRef(e.predicate), self.prefixes)
        )
        expected = lt.short_datatype(datatype) if prop is not None else "string"
        o = e.o
        if isinstance(o, URIRef | BNode):
            diags.append(
                dg.Diagnostic(
                    dg.RANGE_VIOLATION,
                    f"{name} is a data property: its object must be a {expected} literal, "
                    f"not the resource {show_term(o, self.prefixes)}",
                    e.text,
                    f"use a literal, e.g. {_example(datatype)}",
                )
            )
            return
        if isinstance(o, Literal):
            got = lt.literal_family(o)
            if lt.ill_typed(o):
                problem = f"{lt.show_literal(o)} is not a valid {lt.literal_datatype(o)}"
            elif got != family or (
                datatype is not None
                and lt.is_integer_type(datatype)
                and o.datatype is not None
                and not lt.is_integer_type(str(o.datatype))
            ):
                problem = (
                    f"{name} takes {expected}, not {lt.literal_datatype(o)} ({lt.show_literal(o)})"
                )
            else:
                return
            diags.append(
                dg.Diagnostic(
                    dg.DATATYPE_VIOLATION, problem, e.text, f"write it as {_example(datatype)}"
                )
            )
            return
        self._use(uses, o).literal.append((family, e.text, name, ctx))

    # -- class constraints --------------------------------------------------------------------

    def _resolve(
        self, constraints: dict[str, list[_Constraint]], terms: dict[str, Identifier]
    ) -> tuple[list[dg.Diagnostic], dict[str, list[_Constraint]]]:
        """Blame conflicting constraints on the fewest source triples; return what is left.

        rdflib reorders triples, so text order cannot say which of two clashing triples is
        wrong; the triple involved in the most clashes is blamed first (a swapped or replaced
        predicate clashes at both ends), then the weaker kind (property over rdf:type over IRI).
        """
        pairs = [
            (key, a, b)
            for key, items in constraints.items()
            for a, b in itertools.combinations(items, 2)
            if not (a.context and b.context) and self.model.disjoint(a.classes, b.classes)
        ]
        removed: set[int] = set()
        diags: list[dg.Diagnostic] = []
        while pairs:
            score: Counter[str] = Counter()
            rank: dict[str, int] = {}
            for _, a, b in pairs:
                for c in (a, b):
                    if not c.context:
                        score[c.where] += 1
                        rank[c.where] = max(rank.get(c.where, 0), _RANK[c.role])
            worst = max(score, key=lambda w: (score[w], rank[w]))
            for key, a, b in pairs:
                bad, other = (a, b) if a.where == worst and not a.context else (b, a)
                if bad.where != worst or bad.context or id(bad) in removed:
                    continue
                removed.add(id(bad))
                kept = [c for c in constraints[key] if id(c) not in removed]
                diags.append(self._clash(terms[key], bad, other, kept))
            pairs = [
                (k, a, b) for k, a, b in pairs if id(a) not in removed and id(b) not in removed
            ]
        live = {k: [c for c in v if id(c) not in removed] for k, v in constraints.items()}
        return diags, live

    def _conflict(self, a: _Constraint, b: _Constraint) -> bool:
        return self.model.disjoint(a.classes, b.classes)

    def _clash(
        self, term: Identifier, bad: _Constraint, other: _Constraint, live: list[_Constraint]
    ) -> dg.Diagnostic:
        who = show_term(term, self.prefixes)
        known = f"{vocab.show_classes(other.classes)} (from {other.where})"
        kept = [c.classes for c in live]
        if bad.role in ("domain", "range") and bad.prop is not None:
            prop = bad.prop
            side = "subject" if bad.role == "domain" else "object"
            expected = prop.domain if bad.role == "domain" else prop.range
            code = dg.DOMAIN_VIOLATION if bad.role == "domain" else dg.RANGE_VIOLATION
            message = (
                f"{who} is the {side} of {vocab.qname(prop.iri)}, whose {bad.role} is "
                f"{vocab.show_classes(expected)}, but {who} is {known}"
            )
            if bad.role == "domain":
                near = vocab.suggest_property(
                    self.model, prop.iri, subject=kept, kind=prop.kind, exclude=prop.iri, loose=True
                )
            else:
                near = vocab.suggest_property(
                    self.model, prop.iri, obj=kept, kind=prop.kind, exclude=prop.iri, loose=True
                )
            swap = self._swap_hint(bad, kept)
            return dg.Diagnostic(code, message, bad.where, swap or vocab.or_list(near[:3]))
        near = vocab.suggest_class(self.model, next(iter(bad.classes)), kept)
        message = (
            f"{who} cannot be {vocab.show_classes(bad.classes)} (from {bad.where}) and {known}: "
            "the ontology makes these classes disjoint"
        )
        return dg.Diagnostic(dg.DISJOINT_TYPES, message, bad.where, vocab.or_list(near[:3]))

    def _swap_hint(self, bad: _Constraint, kept: list[frozenset[str]]) -> str | None:
        prop = bad.prop
        if prop is None or prop.kind != "object" or not kept:
            return None
        opposite = prop.range if bad.role == "domain" else prop.domain
        if all(not self.model.disjoint(opposite, k) for k in kept):
            return f"swap the subject and object of {vocab.qname(prop.iri)}"
        return None

    # -- literals and filters -----------------------------------------------------------------

    def _literal_uses(
        self, uses: dict[str, _Use], terms: dict[str, Identifier], diags: list[dg.Diagnostic]
    ) -> dict[Variable, str]:
        env: dict[Variable, str] = {}
        for key, use in uses.items():
            if not key.startswith("?"):
                continue
            var = Variable(key[1:])
            own = any(not c for *_, c in use.literal) or any(not c for _, c in use.resource)
            if use.literal and use.resource:
                if own:
                    _, where, name, _ = use.literal[0]
                    diags.append(
                        dg.Diagnostic(
                            dg.RANGE_VIOLATION,
                            f"?{var} is the value of {name} (a literal) but is used as an "
                            f"entity in {use.resource[0][0]}",
                            where,
                            f"use a separate variable for the value of {name}",
                        )
                    )
                continue
            if use.resource:
                env[var] = lt.RESOURCE
                continue
            families = {f for f, *_ in use.literal if f is not None}
            if len(families) > 1 and own:
                (f1, _, n1), (f2, w2, n2) = _first_two_families(use.literal)
                diags.append(
                    dg.Diagnostic(
                        dg.DATATYPE_VIOLATION,
                        f"?{var} joins {n1} ({f1}) with {n2} ({f2}): such values never match",
                        w2,
                        "use a separate variable and compare in a FILTER if needed",
                    )
                )
            if families:
                env[var] = sorted(families)[0] if len(families) > 1 else next(iter(families))
        del terms
        return env

    def _filters(
        self,
        conj: Conj,
        env: dict[Variable, str],
        uses: dict[str, _Use],
        diags: list[dg.Diagnostic],
    ) -> None:
        for v in conj.values:
            for i, var in enumerate(v.variables):
                fams = {lt.expr_family(row[i], {}) for row in v.rows if row[i] is not None}
                family = next(iter(fams)) if len(fams) == 1 else None
                if family is not None and var not in env:
                    env[var] = family
        for agg in conj.aggregates:
            family = lt.aggregate_family(agg.name, agg.arg, env)
            if family is not None:
                env[agg.res] = family
        for var, expr in conj.binds:
            family = lt.expr_family(expr, env)
            if family is not None and var not in env:
                env[var] = family
        for expr in conj.filters:
            for left, op, rights in lt.comparisons(expr):
                lf = lt.expr_family(left, env)
                for right in rights:
                    rf = lt.expr_family(right, env)
                    if lf is None or rf is None or lf == rf:
                        continue
                    diags.append(self._filter_clash(left, op, right, lf, rf))
        del uses

    def _filter_clash(
        self, left: object, op: str, right: object, lf: str, rf: str
    ) -> dg.Diagnostic:
        text = f"{_show_expr(left, self.prefixes)} {op} {_show_expr(right, self.prefixes)}"
        return dg.Diagnostic(
            dg.FILTER_DATATYPE_VIOLATION,
            f"FILTER compares a {lf} value with a {rf} value: {text}",
            f"FILTER({text})",
            _filter_fix(lf, rf),
        )


_LiteralUse = tuple[str | None, str, str]


def _first_two_families(
    items: list[tuple[str | None, str, str, bool]],
) -> tuple[_LiteralUse, _LiteralUse]:
    first = items[0]
    second = next(i for i in items if i[0] != first[0] and i[0] is not None)
    return first[:3], second[:3]


def _path_iris(p: Path | Identifier) -> Iterator[URIRef]:
    if isinstance(p, URIRef):
        yield p
        return
    for attr in ("args", "arg", "path"):
        value = getattr(p, attr, None)
        if isinstance(value, list | tuple):
            for item in value:
                yield from _path_iris(item)
        elif value is not None:
            yield from _path_iris(value)


def _example(datatype: str | None) -> str:
    fam = lt.datatype_family(datatype)
    if fam == lt.DATETIME:
        return '"2022-06-01T00:00:00Z"^^xsd:dateTime'
    if fam == lt.NUMERIC:
        return "900" if datatype and lt.is_integer_type(datatype) else "650.0"
    if fam == lt.BOOLEAN:
        return "true"
    return '"text"'


def _filter_fix(lf: str, rf: str) -> str:
    fams = {lf, rf}
    if lt.DATETIME in fams:
        return 'write times as typed literals: "2022-06-01T08:00:00Z"^^xsd:dateTime'
    if lt.RESOURCE in fams:
        return "compare an entity with an IRI, or compare its id property (e.g. oda:nodeId)"
    if lt.NUMERIC in fams:
        return "compare numbers with unquoted numeric literals, e.g. 650.0"
    return "compare values of the same datatype"


def _show_expr(expr: object, prefixes: dict[str, str]) -> str:
    if isinstance(expr, Identifier):
        return show_term(expr, prefixes)
    name = getattr(expr, "name", None)
    return f"{name}(…)" if name else "…"
