"""Deterministic SPARQL validator: every query is checked here before it runs.

``validate`` parses with rdflib's SPARQL grammar (``grammar.py``: a comment-free copy, faster)
and walks its algebra (``parse.py``), then runs the checks that need no ontology
(``structure.py``: updates, SERVICE, foreign graphs, unbound variables, disconnected patterns;
``grouping.py``: variables a grouped query reads without grouping them, found on the parse tree)
and those that do (``typecheck.py`` over the conjunctive branches of ``branches.py``: unknown
names, domain and range by type inference, literal datatypes, FILTER comparisons; ``vocab.py``
types M100 instance IRIs and finds suggestions). It never raises on bad input: every problem is
a ``Diagnostic`` with a stable code a repair loop can key on.
"""

from __future__ import annotations

from rdflib.term import Variable

from oda_analyst.ontology.model import OntologyModel, load_ontology
from oda_analyst.ontology.namespaces import PREFIXES
from oda_analyst.sparql import diagnostics as dg
from oda_analyst.sparql.diagnostics import Diagnostic, ValidationReport
from oda_analyst.sparql.grouping import check_grouping, explained_unbound
from oda_analyst.sparql.parse import Select, SparqlSyntaxError, parse
from oda_analyst.sparql.structure import check_connected, check_dataset, check_scope
from oda_analyst.sparql.typecheck import TypeChecker

__all__ = ["Diagnostic", "ValidationReport", "validate"]


def validate(
    sparql: str, *, model: OntologyModel | None = None, allowed_graph: str | None = None
) -> ValidationReport:
    """Check one SPARQL text against the ontology and the read-only, one-graph contract.

    ``model`` defaults to the cached ``load_ontology()``; ``allowed_graph`` is the request's own
    named graph, the only one FROM / GRAPH may name (None: no FROM or GRAPH at all).
    """
    try:
        query = parse(sparql)
    except SparqlSyntaxError as exc:
        return dg.report(exc.diagnostics, query_form=exc.form)
    prefixes = {**PREFIXES, **query.prefixes}
    diags, graphs = check_dataset(query, allowed_graph, prefixes)
    ontology = model if model is not None else load_ontology()
    diags.extend(TypeChecker(ontology, prefixes).check(query.root, query.template))
    template_vars = [x for t in query.template for x in (t.s, t.p, t.o) if isinstance(x, Variable)]
    diags.extend(check_scope(query.root, dict.fromkeys(template_vars)))
    grouping = check_grouping(query.grouped)
    if grouping:  # an ungrouped read is the cause; rdflib's SAMPLE rewrite makes it look unbound
        explained = {f"?{v}" for v in explained_unbound(query.grouped)}
        diags = [d for d in diags if d.code != dg.UNBOUND_PROJECTION or d.pattern not in explained]
    diags.extend(grouping)
    diags.extend(check_connected(query.root, prefixes))
    projected = query.root.variables if isinstance(query.root, Select) else ()
    return dg.report(
        diags,
        query_form=query.form,
        variables=tuple(str(v) for v in projected),
        graphs=graphs,
    )
