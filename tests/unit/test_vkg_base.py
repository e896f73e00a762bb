"""The base knowledge graph: contents, idempotent versioned loading, SHACL conformance."""

from __future__ import annotations

import pyshacl
import pytest
import rdflib

from oda_analyst.lake.topology import N_NODES, N_RACKS
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, load_catalogue
from oda_analyst.ontology.model import load_ontology_graph, load_shapes_graph
from oda_analyst.vkg.base import (
    BASE_GRAPH,
    NODE_PLUGINS,
    base_version,
    build_base_kg,
    load_base_kg,
    scale_factor,
)
from oda_analyst.vkg.store import OxigraphStore

PREFIX = ns.sparql_prefixes()


@pytest.fixture(scope="module")
def base_store() -> OxigraphStore:
    store = OxigraphStore(None)
    load_base_kg(store)
    return store


def _count(store: OxigraphStore, cls: str) -> int:
    query = f"{PREFIX}\nSELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ ?x a oda:{cls} }}"
    return int(store.query(query, default_graph=BASE_GRAPH).scalar())


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("DataCenter", 1),
        ("Room", 1),
        ("Rack", N_RACKS),
        ("ComputeNode", N_NODES),
        ("GPU", 4 * N_NODES),
        ("CPU", 2 * N_NODES),
        ("MemoryModule", 16 * N_NODES),
        ("Fan", 4 * N_NODES),
        ("PowerSupply", 2 * N_NODES),
        ("CRAC", 8),
        ("LiquidCoolingPLC", 2),
        ("ElectricalPanel", 5),
        ("Weather", 1),
        ("HPCSystem", 1),
        ("WorkloadManager", 1),
        ("Metric", 573),
    ],
)
def test_base_counts(base_store: OxigraphStore, cls: str, expected: int) -> None:
    assert _count(base_store, cls) == expected


def test_rack_45_has_node_900_and_its_chain(base_store: OxigraphStore) -> None:
    dc, rack, node = f"<{ns.datacenter_iri()}>", f"<{ns.rack_iri(45)}>", f"<{ns.node_iri(900)}>"
    query = f"""{PREFIX}
ASK {{ {dc} oda:hasRoom ?room . ?room oda:hasRack {rack} .
       {rack} oda:hasNode {node} ; oda:rackId 45 .
       {node} oda:nodeId 900 ; oda:slot 0 ; oda:hasGPU <{ns.gpu_iri(900, 3)}> .
       <{ns.system_iri()}> oda:hasComputeNode {node} . }}"""
    assert base_store.query(query, default_graph=BASE_GRAPH).boolean is True
    wrong = f"{PREFIX}\nASK {{ <{ns.rack_iri(44)}> oda:hasNode {node} }}"
    assert base_store.query(wrong, default_graph=BASE_GRAPH).boolean is False


def test_facility_sensors_are_in_the_base_and_node_sensors_are_not(
    base_store: OxigraphStore,
) -> None:
    cat = load_catalogue()
    facility = [m for m in cat if m.plugin not in NODE_PLUGINS and m.dtype != "none"]
    expected = sum(
        {"vertiv": 8, "schneider": 2, "logics": 5, "weather": 1, "slurm": 1}[m.plugin]
        for m in facility
    )
    assert _count(base_store, "Sensor") == expected
    sensor = ns.sensor_iri("schneider", "PLC_PLC_Q101.Temp_mandata", "Q101")
    query = f"""{PREFIX}
SELECT ?e WHERE {{ <{sensor}> oda:observes ?e ;
    oda:observesMetric ?m . ?m oda:scaleFactor ?f . ?e oda:hasSensor ?s FILTER(?f = 10) }}"""
    rows = base_store.query(query, default_graph=BASE_GRAPH).rows
    assert {r[0] for r in rows} == {ns.plc_iri("Q101")}


def test_load_is_idempotent_and_versioned() -> None:
    store = OxigraphStore(None)
    cat = load_catalogue()
    first = load_base_kg(store, cat)
    assert first.loaded and first.triples == store.count_triples(BASE_GRAPH)
    again = load_base_kg(store, cat)
    assert not again.loaded and again.version == first.version
    smaller = Catalogue([m for m in cat if m.name != "total_power"])
    changed = load_base_kg(store, smaller)
    assert changed.loaded and changed.version != first.version
    assert store.count_triples(BASE_GRAPH) == changed.triples < first.triples
    assert load_base_kg(store, smaller, force=True).loaded


def test_version_depends_on_options() -> None:
    cat = load_catalogue()
    assert base_version(cat) == base_version(cat)
    assert base_version(cat, node_sensors=True) != base_version(cat, node_sensors=False)


def test_node_sensors_cover_every_node_metric() -> None:
    cat = load_catalogue()
    data = build_base_kg(cat, nodes=[900, 901], node_sensors=True)
    graph = rdflib.Graph().parse(data=data, format="nt")
    sensor = rdflib.URIRef(ns.ONTOLOGY_NS + "Sensor")
    sensors = set(graph.subjects(rdflib.RDF.type, sensor))
    per_node = [m for m in cat if m.plugin in NODE_PLUGINS]
    facility = _facility_sensor_count(cat)
    assert len(sensors) == 2 * len(per_node) + facility
    gpu_sensor = rdflib.URIRef(ns.sensor_iri("ganglia", "Gpu2_gpu_utilization", "901"))
    observes = rdflib.URIRef(ns.ONTOLOGY_NS + "observes")
    assert graph.value(gpu_sensor, observes) == rdflib.URIRef(ns.gpu_iri(901, 2))


def _facility_sensor_count(cat: Catalogue) -> int:
    per_plugin = {"vertiv": 8, "schneider": 2, "logics": 5, "weather": 1, "slurm": 1}
    return sum(per_plugin.get(m.plugin, 0) for m in cat if m.dtype != "none")


def _validate(data: bytes) -> tuple[bool, str]:
    graph = rdflib.Graph().parse(data=data, format="nt")
    conforms, _, text = pyshacl.validate(
        graph, shacl_graph=load_shapes_graph(), ont_graph=load_ontology_graph(), inference="none"
    )
    return bool(conforms), str(text)


def test_subset_conforms_to_shapes() -> None:
    # Two racks (nodes 0-19 and 900-919) and all facility equipment, metrics and their sensors;
    # the full base (143k triples) takes pySHACL minutes, the builder's shapes are the same.
    data = build_base_kg(nodes=[*range(20), *range(900, 920)])
    conforms, text = _validate(data)
    assert conforms, text[:2000]


def test_shapes_catch_a_node_without_rack() -> None:
    data = build_base_kg(nodes=[900, 901])
    broken = b"\n".join(
        line
        for line in data.splitlines()
        if not (b"#hasNode>" in line and line.endswith(b"node/901> ."))
    )
    conforms, text = _validate(broken + b"\n")
    assert not conforms
    assert "ComputeNode-rack" in text


def test_scale_factor_from_unit() -> None:
    assert scale_factor("0.1 °C") == 10.0
    assert scale_factor("0.02 m³/h") == 50.0
    assert scale_factor("°C") is None
