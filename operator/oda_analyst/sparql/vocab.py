"""Names a query may use: ontology classes and properties, M100 instance IRIs, suggestions.

Instance IRIs (``m100:node/900``) are typed by ``namespaces.check_instance_iri``, the reverse of
the ``*_iri`` builders: the IRI patterns live there only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import lru_cache

from rdflib.namespace import RDF, RDFS

from oda_analyst.errors import UsageError
from oda_analyst.ontology.model import OntologyModel, OntProperty
from oda_analyst.ontology.namespaces import ONTOLOGY_NS, check_instance_iri

# Non-ontology predicates the VKG holds.
ALLOWED_PREDICATES = frozenset({str(RDF.type), str(RDFS.label), str(RDFS.comment)})
STRING_PREDICATES = frozenset({str(RDFS.label), str(RDFS.comment)})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PN_ESCAPE = re.compile(r"\\([_~.\-!$&'()*+,;=/?#@%])")


def instance_class(iri: str) -> tuple[str | None, str | None]:
    """(class IRI, None) for a well-formed M100 instance IRI, else (None, the problem)."""
    # rdflib keeps PN_LOCAL escapes (m100:node\/900) in the IRI; the store would not.
    try:
        cls, _ = check_instance_iri(_PN_ESCAPE.sub(r"\1", iri))
    except UsageError as exc:
        return None, exc.message
    return ONTOLOGY_NS + cls, None


def normalise(text: str) -> str:
    """``hasComputeNode`` / ``has_compute_node`` / ``has compute node`` -> ``has compute node``."""
    spaced = _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split())


def local(iri: str) -> str:
    return iri.removeprefix(ONTOLOGY_NS)


def qname(iri: str) -> str:
    return "oda:" + local(iri) if iri.startswith(ONTOLOGY_NS) else f"<{iri}>"


def show_classes(classes: Iterable[str]) -> str:
    names = sorted(qname(c) for c in classes)
    return names[0] if len(names) == 1 else "(" + " or ".join(names) + ")"


def closest(name: str, candidates: dict[str, str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """IRIs among ``candidates`` (normalised key -> IRI) whose key is closest to ``name``."""
    query = normalise(local(name).split("/")[-1].split("#")[-1])
    hits = ([query] if query in candidates else []) + difflib.get_close_matches(
        query, list(candidates), n=n * 3, cutoff=cutoff
    )
    return list(dict.fromkeys(candidates[h] for h in hits))[:n]


def _nearest(
    name: str, fitting: dict[str, str], everything: dict[str, str], loose: bool
) -> list[str]:
    # Close names that fit the known types first; then (``loose``: when any fitting name helps)
    # the fitting names least far off; when nothing fits at all, close names regardless of type.
    if fitting:
        found = closest(name, fitting)
        return found or (closest(name, fitting, cutoff=0.0) if loose else [])
    return closest(name, everything)


@lru_cache(maxsize=8)
def _property_keys(model: OntologyModel) -> tuple[tuple[str, OntProperty], ...]:
    keys: list[tuple[str, OntProperty]] = []
    for prop in model.properties.values():
        keys.extend((k, prop) for k in dict.fromkeys((normalise(prop.name), normalise(prop.label))))
    return tuple(keys)


@lru_cache(maxsize=8)
def _class_keys(model: OntologyModel) -> tuple[tuple[str, str], ...]:
    keys: list[tuple[str, str]] = []
    for cls in model.classes.values():
        for key in dict.fromkeys(normalise(k) for k in (cls.name, cls.label, *cls.alt_labels)):
            keys.append((key, cls.iri))
    return tuple(keys)


def suggest_property(
    model: OntologyModel,
    name: str,
    *,
    subject: Iterable[frozenset[str]] = (),
    obj: Iterable[frozenset[str]] = (),
    kind: str | None = None,
    exclude: str | None = None,
    loose: bool = False,
) -> list[str]:
    """Nearest property names, keeping those whose domain/range fit the known types."""
    subject_types, object_types = tuple(subject), tuple(obj)

    def fits(prop: OntProperty) -> bool:
        if prop.iri == exclude or (kind is not None and prop.kind != kind):
            return False
        if any(model.disjoint(prop.domain, t) for t in subject_types):
            return False
        return not (
            prop.kind == "object" and any(model.disjoint(prop.range, t) for t in object_types)
        )

    keys = _property_keys(model)
    fitting = {k: p.iri for k, p in keys if fits(p)}
    return _nearest(name, fitting, {k: p.iri for k, p in keys if p.iri != exclude}, loose)


def suggest_class(
    model: OntologyModel, name: str, compatible_with: Iterable[frozenset[str]] = ()
) -> list[str]:
    constraints = tuple(compatible_with)
    keys = _class_keys(model)
    fitting = {
        k: iri
        for k, iri in keys
        if not any(model.disjoint(frozenset({iri}), c) for c in constraints)
    }
    return _nearest(name, fitting, dict(keys), loose=False)


def fitting_properties(
    model: OntologyModel, subject: frozenset[str], obj: frozenset[str] | None, kind: str
) -> list[str]:
    """Properties whose domain admits ``subject`` and (object properties) range admits ``obj``."""
    out = []
    for prop in model.properties.values():
        if prop.kind != kind or model.disjoint(prop.domain, subject):
            continue
        if obj is not None and kind == "object" and model.disjoint(prop.range, obj):
            continue
        out.append(prop.iri)
    return out


def or_list(iris: list[str]) -> str | None:
    return " or ".join(qname(i) for i in iris) if iris else None
