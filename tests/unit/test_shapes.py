"""SHACL shapes (ontology/shapes.ttl) over the fixture folders and a generated topology.

Each file in tests/fixtures/shapes/valid must conform. Each file in .../invalid must fail, and the
set of violated shapes must equal the ``# expect: odash:<Shape>`` lines at the top of the file.
"""

from __future__ import annotations

from pathlib import Path

import pyshacl
import pytest
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import RDF, SH

from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.model import load_ontology, load_ontology_graph, load_shapes_graph

ROOT = Path(__file__).resolve().parents[2]
ONTOLOGY_DIR = ROOT / "ontology"
FIXTURES = ROOT / "tests" / "fixtures" / "shapes"
VALID = sorted((FIXTURES / "valid").glob("*.ttl"))
INVALID = sorted((FIXTURES / "invalid").glob("*.ttl"))
ODA, ODASH = ns.ONTOLOGY_NS, ns.SHAPES_NS
XSD_DATETIME = URIRef(ns.XSD_NS + "dateTime")
XSD_DOUBLE = URIRef(ns.XSD_NS + "double")


@pytest.fixture(scope="module")
def shapes() -> Graph:
    return load_shapes_graph(ONTOLOGY_DIR)


@pytest.fixture(scope="module")
def ontology() -> Graph:
    return load_ontology_graph(ONTOLOGY_DIR)


def validate(data: Graph, shapes: Graph, ontology: Graph) -> tuple[bool, set[str], str]:
    """Validate the way the product does: ontology mixed in, no inference."""
    conforms, report, text = pyshacl.validate(
        data, shacl_graph=shapes, ont_graph=ontology, inference="none"
    )
    violated = {str(s).removeprefix(ODASH) for s in report.objects(None, SH.sourceShape)}
    return bool(conforms), violated, str(text)


def expected_shapes(path: Path) -> set[str]:
    """The ``# expect:`` manifest of an invalid fixture (local names in the odash: namespace)."""
    expected: set[str] = set()
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            expected.update(w.removeprefix("odash:") for w in line.split()[2:])
    return expected


def test_fixture_folders_are_not_empty() -> None:
    assert len(VALID) >= 4
    assert len(INVALID) >= 20


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_fixture_conforms(path: Path, shapes: Graph, ontology: Graph) -> None:
    conforms, violated, text = validate(Graph().parse(path), shapes, ontology)
    assert conforms, text
    assert violated == set()


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_fails_with_the_expected_shapes(
    path: Path, shapes: Graph, ontology: Graph
) -> None:
    expected = expected_shapes(path)
    assert expected, f"{path.name} has no '# expect: odash:<Shape>' line"
    conforms, violated, text = validate(Graph().parse(path), shapes, ontology)
    assert not conforms
    assert violated == expected, text


def test_expected_shapes_exist(shapes: Graph) -> None:
    declared = {
        str(s).removeprefix(ODASH)
        for t in (SH.NodeShape, SH.PropertyShape)
        for s in shapes.subjects(RDF.type, t)
    }
    for path in INVALID:
        assert expected_shapes(path) <= declared, path.name


def test_shapes_graph_is_valid_shacl(shapes: Graph) -> None:
    # meta_shacl validates the shapes against the SHACL-for-SHACL shapes first.
    conforms, _, text = pyshacl.validate(Graph(), shacl_graph=shapes, meta_shacl=True)
    assert conforms, text


def test_shapes_name_only_ontology_terms(shapes: Graph) -> None:
    model = load_ontology(ONTOLOGY_DIR)
    used = {str(t) for triple in shapes for t in triple if str(t).startswith(ODA)}
    unknown = {
        iri for iri in used if model.find_class(iri) is None and model.find_property(iri) is None
    }
    assert unknown == set()
    assert len(used) > 30


def test_every_rule_is_a_named_shape_with_a_target(shapes: Graph) -> None:
    targets = (SH.targetClass, SH.targetSubjectsOf, SH.targetObjectsOf, SH.targetNode)
    named = {s for s in shapes.subjects(RDF.type, SH.PropertyShape)}
    assert len(named) >= 30
    for shape in named:
        assert isinstance(shape, URIRef) and str(shape).startswith(ODASH), shape
        assert any((shape, t, None) in shapes for t in targets), shape
    # No anonymous property shapes hiding inside node shapes: violations must name their rule.
    assert set(shapes.objects(None, SH.property)) <= named


# -- a generated topology, the way the base-graph builder writes it ------------------------------


def _add(g: Graph, s: str, p: str, o: str | Literal) -> None:
    g.add((URIRef(s), URIRef(ODA + p), o if isinstance(o, Literal) else URIRef(o)))


def generated_graph(racks: int = 2, nodes_per_rack: int = 20) -> Graph:
    """Racks of nodes with four GPUs each, one total_power sensor per node and two readings."""
    g = Graph()
    dc, room = ns.datacenter_iri(), ns.room_iri()
    g.add((URIRef(dc), RDF.type, URIRef(ODA + "DataCenter")))
    g.add((URIRef(room), RDF.type, URIRef(ODA + "Room")))
    _add(g, dc, "hasRoom", room)
    metric = ns.metric_iri("ipmi", "total_power")
    g.add((URIRef(metric), RDF.type, URIRef(ODA + "Metric")))
    _add(g, metric, "metricName", Literal("total_power"))
    _add(g, metric, "plugin", Literal("ipmi"))
    _add(g, metric, "unit", Literal("W"))
    for rack in range(racks):
        g.add((URIRef(ns.rack_iri(rack)), RDF.type, URIRef(ODA + "Rack")))
        _add(g, room, "hasRack", ns.rack_iri(rack))
        _add(g, ns.rack_iri(rack), "rackId", Literal(rack))
        for node in range(rack * nodes_per_rack, (rack + 1) * nodes_per_rack):
            n = ns.node_iri(node)
            g.add((URIRef(n), RDF.type, URIRef(ODA + "ComputeNode")))
            _add(g, ns.rack_iri(rack), "hasNode", n)
            _add(g, n, "nodeId", Literal(node))
            _add(g, n, "slot", Literal(node % nodes_per_rack))
            for gpu in range(4):
                g.add((URIRef(ns.gpu_iri(node, gpu)), RDF.type, URIRef(ODA + "GPU")))
                _add(g, n, "hasGPU", ns.gpu_iri(node, gpu))
                _add(g, ns.gpu_iri(node, gpu), "gpuIndex", Literal(gpu))
            sensor = ns.sensor_iri("ipmi", "total_power", node)
            g.add((URIRef(sensor), RDF.type, URIRef(ODA + "Sensor")))
            _add(g, sensor, "observes", n)
            _add(g, sensor, "observesMetric", metric)
            for k, stamp in enumerate(("2022-06-01T08:00:00Z", "2022-06-01T08:00:20Z")):
                r = ns.reading_iri(sensor, 1654070400000 + 20000 * k)
                _add(g, r, "fromSensor", sensor)
                _add(g, r, "timestamp", Literal(stamp, datatype=XSD_DATETIME))
                _add(g, r, "value", Literal(600.0 + node, datatype=XSD_DOUBLE))
    return g


def test_generated_topology_conforms(shapes: Graph, ontology: Graph) -> None:
    graph = generated_graph()
    assert len(graph) > 900
    conforms, violated, text = validate(graph, shapes, ontology)
    assert conforms and violated == set(), text


def test_generated_topology_breaks_on_one_missing_edge(shapes: Graph, ontology: Graph) -> None:
    graph = generated_graph()
    graph.remove((URIRef(ns.rack_iri(1)), URIRef(ODA + "hasNode"), URIRef(ns.node_iri(37))))
    reading = ns.reading_iri(ns.sensor_iri("ipmi", "total_power", 5), 1654070400000)
    graph.remove((URIRef(reading), URIRef(ODA + "timestamp"), None))
    conforms, violated, _ = validate(graph, shapes, ontology)
    assert not conforms
    assert violated == {"ComputeNode-rack", "Reading-timestamp"}
