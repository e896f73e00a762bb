"""The ODA ontology as an immutable, typed lookup structure.

``load_ontology()`` parses ``oda.ttl`` once (cached per file and modification time) and returns
an ``OntologyModel``: classes, object and data properties with their domains and ranges, and the
precomputed class hierarchy, disjointness and property hierarchy. The SPARQL validator runs type
inference on it, so every lookup is a dict or frozenset access; rdflib is used only while loading.

A class expression (``ClassRef``) is either one class (local name, ``oda:`` name or IRI) or a
frozenset of class IRIs meaning their union, which is how a union domain or range is returned.
Named union classes (``MonitoredEntity``) are part of the hierarchy: each member is a subclass.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from rdflib import Graph, URIRef
from rdflib import Literal as RdfLiteral
from rdflib.collection import Collection
from rdflib.namespace import OWL, RDF, RDFS, SKOS
from rdflib.term import Node

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.ontology.namespaces import ONTOLOGY_IRI, ONTOLOGY_NS, XSD_NS

ONTOLOGY_FILE = "oda.ttl"
SHAPES_FILE = "shapes.ttl"

PropertyKind = Literal["object", "data"]
TermKind = Literal["class", "object_property", "data_property", "property", "any"]
ClassRef = str | frozenset[str]


class UnknownTermError(OntologyError):
    """A name is not a class or property of the ontology (the hint lists the nearest names)."""

    code = "unknown_term"


@dataclass(frozen=True, slots=True)
class OntClass:
    """One named class."""

    iri: str
    name: str
    label: str
    comment: str
    parents: frozenset[str]  # direct named superclasses (IRIs), incl. named unions it is in
    union_of: frozenset[str]  # members when the class is defined as a union, else empty
    alt_labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OntProperty:
    """One object or data property. A union domain or range has several IRIs."""

    iri: str
    name: str
    kind: PropertyKind
    label: str
    comment: str
    domain: frozenset[str]
    range: frozenset[str]  # class IRIs, or the one XSD datatype IRI of a data property
    parents: frozenset[str]  # direct super-properties (IRIs)
    transitive: bool
    inverse: str | None

    @property
    def datatype(self) -> str | None:
        """The XSD datatype IRI of a data property; None for an object property."""
        return next(iter(self.range)) if self.kind == "data" else None


@dataclass(frozen=True, eq=False)
class OntologyModel:
    """Immutable view of the ontology. Build it with ``load_ontology``."""

    iri: str
    version: str
    source: Path
    classes: Mapping[str, OntClass]  # local name -> class
    object_properties: Mapping[str, OntProperty]  # local name -> property
    data_properties: Mapping[str, OntProperty]
    _classes_by_iri: Mapping[str, OntClass]
    _props_by_iri: Mapping[str, OntProperty]
    _ancestors: Mapping[str, frozenset[str]]  # class IRI -> superclasses incl. itself
    _descendants: Mapping[str, frozenset[str]]
    _disjoint: frozenset[frozenset[str]]  # pairs of named classes with no common instance
    properties: Mapping[str, OntProperty]  # object and data properties by local name
    _super_props: Mapping[str, frozenset[str]]  # property IRI -> super-properties incl. itself
    _sub_props: Mapping[str, frozenset[str]]
    _suggest: Mapping[str, Mapping[str, str]]  # term kind -> normalised name/label -> local name

    # -- names ---------------------------------------------------------------------------------

    @staticmethod
    def to_iri(name: str) -> str:
        """``ComputeNode`` / ``oda:ComputeNode`` / full IRI -> full IRI (not checked)."""
        text = name.strip()
        if text.startswith("<") and text.endswith(">"):
            text = text[1:-1]
        if "://" in text:
            return text
        return ONTOLOGY_NS + text.removeprefix("oda:")

    @staticmethod
    def local_name(iri: str) -> str:
        """Local name of an ontology IRI (the part after ``#``)."""
        return iri.removeprefix(ONTOLOGY_NS)

    def find_class(self, name: str) -> OntClass | None:
        """The class with this name or IRI, or None."""
        return self._classes_by_iri.get(self.to_iri(name))

    def find_property(self, name: str) -> OntProperty | None:
        """The object or data property with this name or IRI, or None."""
        return self._props_by_iri.get(self.to_iri(name))

    def require_class(self, name: str) -> OntClass:
        """The class with this name; UnknownTermError with suggestions if there is none."""
        found = self.find_class(name)
        if found is None:
            raise self._unknown(name, "class")
        return found

    def require_property(self, name: str) -> OntProperty:
        """The property with this name; UnknownTermError with suggestions if there is none."""
        found = self.find_property(name)
        if found is None:
            raise self._unknown(name, "property")
        return found

    def _unknown(self, name: str, kind: TermKind) -> UnknownTermError:
        near = self.nearest(name, kind)
        hint = (
            f"did you mean: {', '.join(near)}?" if near else f"no {kind} of the ontology is close"
        )
        return UnknownTermError(f"unknown {kind.replace('_', ' ')} {name!r}", hint=hint)

    # -- class hierarchy -----------------------------------------------------------------------

    def _members(self, ref: ClassRef) -> frozenset[str]:
        if isinstance(ref, frozenset):
            for iri in ref:
                if iri not in self._classes_by_iri:
                    self.require_class(iri)
            return ref
        return frozenset({self.require_class(ref).iri})

    def superclasses(self, cls: str) -> frozenset[str]:
        """IRIs of all superclasses of a class, itself included."""
        return self._ancestors[self.require_class(cls).iri]

    def subclasses(self, cls: str) -> frozenset[str]:
        """IRIs of all subclasses of a class, itself included."""
        return self._descendants[self.require_class(cls).iri]

    def is_subclass(self, a: ClassRef, b: ClassRef) -> bool:
        """True when every instance of ``a`` is an instance of ``b`` (unions allowed)."""
        targets = self._members(b)
        return all(not targets.isdisjoint(self._ancestors[x]) for x in self._members(a))

    def disjoint(self, a: ClassRef, b: ClassRef) -> bool:
        """True when ``a`` and ``b`` can have no common instance (through the hierarchy)."""
        left, right = self._members(a), self._members(b)
        return all(frozenset({x, y}) in self._disjoint for x in left for y in right)

    def top_class(self, cls: str) -> str | None:
        """The one layer (Physical/Logical/ExternalEntity IRI) a class is under, else None."""
        tops = [t for t in _TOP_CLASSES if ONTOLOGY_NS + t in self.superclasses(cls)]
        return ONTOLOGY_NS + tops[0] if len(tops) == 1 else None

    # -- properties ----------------------------------------------------------------------------

    def superproperties(self, prop: str) -> frozenset[str]:
        """IRIs of a property and all its super-properties."""
        return self._super_props[self.require_property(prop).iri]

    def subproperties(self, prop: str) -> frozenset[str]:
        """IRIs of a property and all its sub-properties."""
        return self._sub_props[self.require_property(prop).iri]

    def is_subproperty(self, a: str, b: str) -> bool:
        """True when ``a`` is ``b`` or a (transitive) sub-property of it."""
        return self.require_property(b).iri in self.superproperties(a)

    def is_transitive(self, prop: str) -> bool:
        """True for an owl:TransitiveProperty (``contains``)."""
        return self.require_property(prop).transitive

    def datatype(self, prop: str) -> str:
        """XSD datatype IRI of a data property; UnknownTermError for anything else."""
        found = self.require_property(prop)
        if found.datatype is None:
            raise UnknownTermError(
                f"{found.name} is an object property, not a data property",
                hint=f"data properties: {', '.join(self.nearest(prop, 'data_property'))}",
            )
        return found.datatype

    def properties_of(self, cls: ClassRef, kind: PropertyKind | None = None) -> tuple[str, ...]:
        """Local names of the properties whose domain admits every instance of ``cls``."""
        return tuple(
            sorted(
                p.name
                for p in self._props_by_iri.values()
                if (kind is None or p.kind == kind) and self.is_subclass(cls, p.domain)
            )
        )

    # -- suggestions ---------------------------------------------------------------------------

    def nearest(self, name: str, kind: TermKind = "any", n: int = 3) -> list[str]:
        """Up to ``n`` local names of the given kind closest to ``name`` (names and labels)."""
        index = self._suggest[kind]
        query = _normalise(self.local_name(self.to_iri(name)))
        hits = difflib.get_close_matches(query, list(index), n=n * 4, cutoff=0.55)
        ordered = [index[h] for h in ([query] if query in index else []) + hits]
        return list(dict.fromkeys(ordered))[:n]


_TOP_CLASSES = ("PhysicalEntity", "LogicalEntity", "ExternalEntity")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _normalise(text: str) -> str:
    """``hasComputeNode`` / ``has_compute_node`` / ``Has compute node`` -> ``has compute node``."""
    spaced = _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split())


def _term_keys(name: str, label: str, alt: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_normalise(k) for k in (name, label, *alt) if k))


def _suggestion_index(
    classes: Iterable[OntClass], props: Iterable[OntProperty]
) -> dict[str, Mapping[str, str]]:
    """Per term kind, normalised local names, labels and alt labels -> local name."""
    keyed: list[tuple[str, str, tuple[str, ...]]] = [
        ("class", c.name, _term_keys(c.name, c.label, c.alt_labels)) for c in classes
    ]
    keyed += [(f"{p.kind}_property", p.name, _term_keys(p.name, p.label, ())) for p in props]
    groups = {
        "class": ("class",),
        "object_property": ("object_property",),
        "data_property": ("data_property",),
        "property": ("object_property", "data_property"),
        "any": ("class", "object_property", "data_property"),
    }
    out: dict[str, Mapping[str, str]] = {}
    for kind, members in groups.items():
        index: dict[str, str] = {}
        for term_kind, name, keys in keyed:
            if term_kind in members:
                for key in keys:
                    index.setdefault(key, name)
        out[kind] = MappingProxyType(index)
    return out


# -- loading -----------------------------------------------------------------------------------


def _resolve(path: Path | str | None, file_name: str) -> Path:
    if path is None:
        path = get_settings().ontology_dir
    resolved = Path(path)
    if resolved.is_dir():
        resolved = resolved / file_name
    if not resolved.is_file():
        raise OntologyError(
            f"ontology file not found: {resolved}",
            hint=f"set ODA_ONTOLOGY_DIR to the folder holding {file_name}",
        )
    return resolved.resolve()


def _parse(path: Path) -> Graph:
    graph = Graph()
    try:
        graph.parse(path, format="turtle")
    except Exception as exc:  # rdflib raises several unrelated types for bad Turtle
        raise OntologyError(
            f"cannot parse {path}: {exc}", hint="fix the Turtle syntax at the position shown"
        ) from None
    return graph


def load_ontology_graph(path: Path | str | None = None) -> Graph:
    """A fresh rdflib graph of ``oda.ttl`` (a file, or a folder holding it)."""
    return _parse(_resolve(path, ONTOLOGY_FILE))


def load_shapes_graph(path: Path | str | None = None) -> Graph:
    """A fresh rdflib graph of ``shapes.ttl`` (a file, or a folder holding it)."""
    return _parse(_resolve(path, SHAPES_FILE))


def load_ontology(path: Path | str | None = None) -> OntologyModel:
    """The ontology model of ``oda.ttl``; parsed once per file version (cached).

    ``path`` is the file or its folder; default ``get_settings().ontology_dir``. Raises
    OntologyError for a missing, unparsable or structurally broken ontology.
    """
    resolved = _resolve(path, ONTOLOGY_FILE)
    return _load_cached(resolved, resolved.stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int) -> OntologyModel:
    return build_model(_parse(path), source=path)


def _text(graph: Graph, subject: Node, predicate: URIRef) -> str:
    values = [o for o in graph.objects(subject, predicate) if isinstance(o, RdfLiteral)]
    english = [v for v in values if v.language in (None, "en")]
    return str((english or values)[0]) if values else ""


def _union_members(graph: Graph, node: Node) -> frozenset[str] | None:
    head = graph.value(node, OWL.unionOf)
    if head is None:
        return None
    return frozenset(str(m) for m in Collection(graph, head))


def _class_expr(graph: Graph, node: Node, where: str) -> frozenset[str]:
    if isinstance(node, URIRef):
        return frozenset({str(node)})
    members = _union_members(graph, node)
    if members:
        return members
    raise OntologyError(
        f"{where} is neither a named class nor a union of named classes",
        hint="use a class IRI or [ owl:unionOf ( ... ) ]",
    )


def _closure(direct: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Reflexive-transitive closure of a parent relation (cycle-safe)."""
    out: dict[str, frozenset[str]] = {}
    for start in direct:
        seen = {start}
        stack = [start]
        while stack:
            for parent in direct.get(stack.pop(), frozenset()):
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        out[start] = frozenset(seen)
    return out


def _invert(closure: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    down: dict[str, set[str]] = {k: set() for k in closure}
    for child, ups in closure.items():
        for up in ups:
            down.setdefault(up, set()).add(child)
    return {k: frozenset(v) for k, v in down.items()}


def _read_classes(graph: Graph) -> dict[str, OntClass]:
    named = {s for s in graph.subjects(RDF.type, OWL.Class) if isinstance(s, URIRef)}
    unions: dict[str, frozenset[str]] = {}
    for cls in named:
        for node in (cls, *graph.objects(cls, OWL.equivalentClass)):
            members = _union_members(graph, node)
            if members:
                unions[str(cls)] = members
    parents: dict[str, set[str]] = {str(c): set() for c in named}
    for cls in named:
        parents[str(cls)].update(
            str(p) for p in graph.objects(cls, RDFS.subClassOf) if isinstance(p, URIRef)
        )
    for union, members in unions.items():
        for member in members:
            if member not in parents:
                raise OntologyError(
                    f"union {union} names an undeclared class {member}",
                    hint="declare every union member as an owl:Class",
                )
            parents[member].add(union)
    classes: dict[str, OntClass] = {}
    for cls in named:
        iri = str(cls)
        classes[iri] = OntClass(
            iri=iri,
            name=iri.removeprefix(ONTOLOGY_NS),
            label=_text(graph, cls, RDFS.label),
            comment=_text(graph, cls, RDFS.comment),
            parents=frozenset(parents[iri]),
            union_of=unions.get(iri, frozenset()),
            alt_labels=tuple(sorted(str(a) for a in graph.objects(cls, SKOS.altLabel))),
        )
    return classes


def _read_disjoint_pairs(graph: Graph) -> set[frozenset[str]]:
    pairs: set[frozenset[str]] = set()
    for a, b in graph.subject_objects(OWL.disjointWith):
        pairs.add(frozenset({str(a), str(b)}))
    for group in graph.subjects(RDF.type, OWL.AllDisjointClasses):
        head = graph.value(group, OWL.members)
        if head is None:
            raise OntologyError(
                "an owl:AllDisjointClasses axiom has no owl:members",
                hint="list the disjoint classes with owl:members ( ... )",
            )
        members = [str(m) for m in Collection(graph, head)]
        pairs.update(frozenset({x, y}) for x in members for y in members if x != y)
    return pairs


def _disjointness(
    classes: Mapping[str, OntClass],
    ancestors: Mapping[str, frozenset[str]],
    declared: set[frozenset[str]],
) -> frozenset[frozenset[str]]:
    """All pairs of named classes that are disjoint, derived from the declared pairs."""

    def plain(x: str, y: str) -> bool:
        return any(frozenset({p, q}) in declared for p in ancestors[x] for q in ancestors[y])

    def expand(x: str) -> frozenset[str]:
        # A union class is disjoint from y only when each of its members is.
        members = classes[x].union_of
        return frozenset().union(*(expand(m) for m in members)) if members else frozenset({x})

    result: set[frozenset[str]] = set()
    for x in classes:
        for y in classes:
            if all(plain(p, q) for p in expand(x) for q in expand(y)):
                result.add(frozenset({x, y}))
    return frozenset(result)


def _read_properties(graph: Graph, classes: Mapping[str, OntClass]) -> dict[str, OntProperty]:
    props: dict[str, OntProperty] = {}
    inverses: dict[str, str] = {}
    for a, b in graph.subject_objects(OWL.inverseOf):
        inverses[str(a)], inverses[str(b)] = str(b), str(a)
    kinds: tuple[tuple[URIRef, PropertyKind], ...] = (
        (OWL.ObjectProperty, "object"),
        (OWL.DatatypeProperty, "data"),
    )
    for rdf_type, kind in kinds:
        for prop in graph.subjects(RDF.type, rdf_type):
            if not isinstance(prop, URIRef):
                continue
            iri = str(prop)
            name = iri.removeprefix(ONTOLOGY_NS)
            domain_node = graph.value(prop, RDFS.domain)
            range_node = graph.value(prop, RDFS.range)
            if domain_node is None or range_node is None:
                raise OntologyError(
                    f"property {name} has no rdfs:{'domain' if domain_node is None else 'range'}",
                    hint="every property of oda.ttl needs a domain and a range",
                )
            domain = _class_expr(graph, domain_node, f"domain of {name}")
            if kind == "data":
                if not isinstance(range_node, URIRef) or not str(range_node).startswith(XSD_NS):
                    raise OntologyError(
                        f"data property {name} has range {range_node}, not an XSD datatype",
                        hint="give every data property one xsd: datatype as rdfs:range",
                    )
                rng = frozenset({str(range_node)})
            else:
                rng = _class_expr(graph, range_node, f"range of {name}")
            undeclared = (domain | (rng if kind == "object" else frozenset())) - set(classes)
            if undeclared:
                raise OntologyError(
                    f"property {name} refers to undeclared class {sorted(undeclared)[0]}",
                    hint="declare it as an owl:Class or fix the name",
                )
            props[iri] = OntProperty(
                iri=iri,
                name=name,
                kind=kind,
                label=_text(graph, prop, RDFS.label),
                comment=_text(graph, prop, RDFS.comment),
                domain=domain,
                range=rng,
                parents=frozenset(
                    str(p) for p in graph.objects(prop, RDFS.subPropertyOf) if isinstance(p, URIRef)
                ),
                transitive=(prop, RDF.type, OWL.TransitiveProperty) in graph,
                inverse=inverses.get(iri),
            )
    return props


def build_model(graph: Graph, source: Path = Path("<graph>")) -> OntologyModel:
    """Build the model from an already parsed ontology graph (checks its structure)."""
    by_iri = _read_classes(graph)
    if not by_iri:
        raise OntologyError(f"{source} declares no owl:Class", hint="is this the ODA ontology?")
    parents = {iri: c.parents for iri, c in by_iri.items()}
    unknown = {p for ps in parents.values() for p in ps} - set(by_iri)
    if unknown:
        raise OntologyError(
            f"rdfs:subClassOf names an undeclared class {sorted(unknown)[0]}",
            hint="declare it as an owl:Class or fix the name",
        )
    ancestors = _closure(parents)
    props = _read_properties(graph, by_iri)
    prop_parents = {iri: p.parents & set(props) for iri, p in props.items()}
    super_props = _closure(prop_parents)
    ontology = URIRef(ONTOLOGY_IRI)
    return OntologyModel(
        iri=ONTOLOGY_IRI,
        version=_text(graph, ontology, OWL.versionInfo),
        source=source,
        classes=MappingProxyType({c.name: c for c in by_iri.values()}),
        object_properties=MappingProxyType(
            {p.name: p for p in props.values() if p.kind == "object"}
        ),
        data_properties=MappingProxyType({p.name: p for p in props.values() if p.kind == "data"}),
        _classes_by_iri=MappingProxyType(by_iri),
        _props_by_iri=MappingProxyType(props),
        _ancestors=MappingProxyType(ancestors),
        _descendants=MappingProxyType(_invert(ancestors)),
        _disjoint=_disjointness(by_iri, ancestors, _read_disjoint_pairs(graph)),
        properties=MappingProxyType({p.name: p for p in props.values()}),
        _super_props=MappingProxyType(super_props),
        _sub_props=MappingProxyType(_invert(super_props)),
        _suggest=MappingProxyType(_suggestion_index(by_iri.values(), props.values())),
    )
