"""Ontology traversal paths for the SPARQL prompt, derived from ``oda.ttl`` (never hard-coded).

The paper's SPARQL generator is "ontology-augmented": the prompt carries the traversal paths of
the plugins involved, which narrow the graph patterns a model may write. Here they are computed
from the ontology model and the metric catalogue:

- the start classes are the entity classes the grounded metrics measure (catalogue ``entity``,
  e.g. GPU for ``Gpu0_gpu_temp``) plus the classes of the entities the question names (a rack, a
  job);
- a breadth-first walk follows object properties between concrete classes, in the direction
  the instance data writes them, up to ``depth`` hops; unions and layer tops (MonitoredEntity,
  PhysicalEntity) are shown as an edge's end but never walked through, and generic properties
  (``contains``, ``hasComponent``: super-properties of what the data writes) are left out;
- of an inverse pair (``observes`` / ``hasSensor``) the one whose domain is a named class, not a
  union, is kept, which is the direction the curated examples use;
- every visited class lists its data properties with their XSD datatypes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.ontology.model import OntologyModel, OntProperty, load_ontology
from oda_analyst.ontology.namespaces import XSD_NS

_LAYER_TOPS = frozenset({"PhysicalEntity", "LogicalEntity", "ExternalEntity"})
# The reading chain every metric question walks, whatever its plugin.
_ALWAYS = ("Sensor", "Reading", "Metric")


@dataclass(frozen=True)
class Edge:
    """``domain −oda:prop→ range`` with the classes the walk met (not the declared ones)."""

    domain: str
    prop: str
    range: str

    def render(self) -> str:
        return f"{self.domain} −oda:{self.prop}→ {self.range}"


@dataclass(frozen=True)
class OntologyPaths:
    """The edges and data properties a prompt shows, in a stable order."""

    classes: tuple[str, ...]
    edges: tuple[Edge, ...]
    data_properties: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    def render(self) -> str:
        lines = ["Object properties (subject −property→ object, as the data writes them):"]
        lines += [f"  {e.render()}" for e in self.edges]
        lines.append("Data properties (class: property datatype):")
        for cls, props in self.data_properties:
            listed = ", ".join(f"oda:{p} {dt}" for p, dt in props)
            lines.append(f"  {cls}: {listed}")
        return "\n".join(lines)


def _walkable(model: OntologyModel, name: str) -> bool:
    """A concrete class the walk may continue from (not a union, not a layer top)."""
    cls = model.classes.get(name)
    return cls is not None and not cls.union_of and name not in _LAYER_TOPS


def _kept_properties(model: OntologyModel) -> list[OntProperty]:
    """Object properties the data writes: no super-properties, one of each inverse pair."""
    props = sorted(model.object_properties.values(), key=lambda p: p.name)
    kept = []
    for prop in props:
        if len(model.subproperties(prop.name)) > 1:
            continue  # a generic closure (contains, hasComponent); the data writes its children
        if prop.inverse is not None:
            other = model.find_property(prop.inverse)
            mine_union = _is_union(model, prop.domain)
            if other is not None and mine_union and not _is_union(model, other.domain):
                continue
        kept.append(prop)
    return kept


def _is_union(model: OntologyModel, ref: frozenset[str]) -> bool:
    if len(ref) != 1:
        return True
    cls = model.find_class(next(iter(ref)))
    return cls is None or bool(cls.union_of)


def _ends(model: OntologyModel, ref: frozenset[str]) -> list[str]:
    return sorted(model.local_name(i) for i in ref)


def _matches(model: OntologyModel, name: str, end: frozenset[str], start: frozenset[str]) -> bool:
    """Whether class ``name`` may stand at a property end declared as ``end``.

    A union end (MonitoredEntity, what a sensor observes) is specialised only to the classes the
    question is about, else every physical class would "have a sensor"; a layer top
    (PhysicalEntity, the range of powers/cools/contains) is too generic to walk through at all.
    """
    if not model.is_subclass(name, end):
        return False
    if _is_union(model, end):
        return name in start
    return model.local_name(next(iter(end))) not in _LAYER_TOPS


def _neighbours(
    model: OntologyModel, name: str, props: list[OntProperty], start: frozenset[str]
) -> Iterable[tuple[Edge, str]]:
    """(edge, other class) for every kept property with ``name`` at one end."""
    for prop in props:
        if _matches(model, name, prop.domain, start):
            for other in _ends(model, prop.range):
                yield Edge(name, prop.name, other), other
        if _matches(model, name, prop.range, start):
            for other in _ends(model, prop.domain):
                yield Edge(other, prop.name, name), other


def _layer_wide(model: OntologyModel, prop: str) -> bool:
    """A data property every physical entity has (model, manufacturer): noise in a prompt."""
    domain = model.require_property(prop).domain
    return all(model.local_name(d) in _LAYER_TOPS for d in domain)


def _datatype(iri: str) -> str:
    return "xsd:" + iri.removeprefix(XSD_NS) if iri.startswith(XSD_NS) else f"<{iri}>"


def traversal_paths(
    start: Collection[str], *, model: OntologyModel | None = None, depth: int = 2
) -> OntologyPaths:
    """The paths around the ``start`` classes (local names), ``depth`` object-property hops."""
    onto = model if model is not None else load_ontology()
    props = _kept_properties(onto)
    order: list[str] = []
    frontier = sorted(dict.fromkeys([*start, *_ALWAYS]))
    for name in frontier:
        onto.require_class(name)
    # Only the question's own classes specialise a union end, not the reading chain.
    starts = frozenset(start) - frozenset(_ALWAYS)
    seen = set(frontier)
    order.extend(frontier)
    edges: dict[tuple[str, str, str], Edge] = {}
    for _ in range(depth):
        nxt: list[str] = []
        for name in frontier:
            for edge, other in _neighbours(onto, name, props, starts):
                edges.setdefault((edge.domain, edge.prop, edge.range), edge)
                if other not in seen and _walkable(onto, other):
                    seen.add(other)
                    nxt.append(other)
        frontier = sorted(nxt)
        order.extend(frontier)
    visited = set(order)
    shown = _prune_generic(onto, list(edges.values()), visited)
    data = []
    for name in order:
        found = [
            (p, _datatype(onto.datatype(p)))
            for p in onto.properties_of(name, kind="data")
            if not _layer_wide(onto, p)
        ]
        if found:
            data.append((name, tuple(found)))
    return OntologyPaths(tuple(order), tuple(shown), tuple(data))


def _prune_generic(model: OntologyModel, edges: list[Edge], visited: set[str]) -> list[Edge]:
    """Keep edges touching a visited class; drop one shown more specifically by another.

    ``DataCenter −hasEquipment→ Equipment`` adds nothing once ``DataCenter −hasEquipment→ CRAC``
    is there (CRAC ⊑ Equipment); likewise ``Sensor −observes→ MonitoredEntity`` once
    ``Sensor −observes→ GPU`` is.
    """

    def finer(a: str, b: str) -> bool:
        return a != b and model.is_subclass(a, b)

    kept = []
    for e in edges:
        if e.domain not in visited and e.range not in visited:
            continue
        shadowed = any(
            o.prop == e.prop
            and (
                (o.domain == e.domain and finer(o.range, e.range))
                or (o.range == e.range and finer(o.domain, e.domain))
            )
            for o in edges
        )
        if not shadowed:
            kept.append(e)
    return sorted(kept, key=lambda e: (e.domain, e.prop, e.range))


def plugin_classes(plugins: Iterable[str], catalogue: Catalogue | None = None) -> list[str]:
    """The ontology classes the metrics of these plugins measure (catalogue ``entity``)."""
    cat = catalogue or load_catalogue()
    wanted = set(plugins)
    return sorted({m.entity for m in cat if m.plugin in wanted})
