"""The ODA ontology (ontology/oda.ttl), its loader/model and the IRI conventions."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import owlrl
import pytest
from owlrl.Namespaces import ERRNS
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF, RDFS

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError, UsageError
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.model import (
    OntClass,
    OntologyModel,
    OntProperty,
    UnknownTermError,
    build_model,
    load_ontology,
    load_ontology_graph,
)

ONTOLOGY_DIR = Path(__file__).resolve().parents[2] / "ontology"
ODA = ns.ONTOLOGY_NS

N_CLASSES = 39  # + AggregateObservation
N_OBJECT_PROPERTIES = 27  # + aggregateOf, aggregateOfUser, sourceMetric
N_DATA_PROPERTIES = 63  # + the aggregate observation's seven, + readingCount

TOPS = ("PhysicalEntity", "LogicalEntity", "ExternalEntity")
# Names other issues rely on (fixed by the lead).
FIXED_CLASSES = (
    *TOPS,
    "DataCenter", "Room", "Rack", "ComputeNode", "CPU", "GPU", "MemoryModule", "Fan",
    "PowerSupply", "Equipment", "PowerEquipment", "UPS", "PDU", "Breaker", "SwitchBoard",
    "ElectricalPanel", "CoolingEquipment", "Chiller", "Pump", "CoolingTower", "CRAC",
    "LiquidCoolingPLC", "Sensor", "HPCSystem", "WorkloadManager", "Job", "User", "Metric",
    "JobMetric", "SoftwareMetric", "Reading", "Time", "Weather", "CarbonIntensity",
)  # fmt: skip
FIXED_OBJECT_PROPERTIES = (
    "contains", "hasRoom", "hasRack", "hasNode", "hasComponent", "hasCPU", "hasGPU",
    "hasMemory", "hasFan", "hasPowerSupply", "hasEquipment", "hasSensor", "observes",
    "observesMetric", "fromSensor", "runsOn", "submittedBy", "managedBy", "schedules",
    "hasComputeNode", "hostedIn",
)  # fmt: skip
FIXED_DATA_PROPERTIES = (
    "timestamp", "value", "textValue", "metricName", "plugin", "unit", "samplingPeriod",
    "nodeId", "rackId", "gpuIndex", "socketIndex", "slot", "row", "column", "jobId",
    "submitTime", "startTime", "endTime", "jobState", "partition", "qos", "numNodes",
    "numCPUs", "numGPUs", "timeLimit", "userId", "exitCode",
)  # fmt: skip
# Classes the metric catalogue says a metric measures: each must be observable by a sensor.
CATALOGUE_ENTITIES = (
    "ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply", "CRAC",
    "LiquidCoolingPLC", "ElectricalPanel", "Weather", "HPCSystem", "Job",
)  # fmt: skip


def xsd(name: str) -> URIRef:
    # rdflib's closed XSD namespace warns when pytest probes module attributes, so no XSD import.
    return URIRef(ns.XSD_NS + name)


XSD_DATATYPES = {str(xsd(t)) for t in ("dateTime", "double", "string", "integer")}


@pytest.fixture(scope="module")
def model() -> OntologyModel:
    return load_ontology(ONTOLOGY_DIR)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return load_ontology_graph(ONTOLOGY_DIR)


def _named(graph: Graph, rdf_type: URIRef) -> set[URIRef]:
    return {s for s in graph.subjects(RDF.type, rdf_type) if isinstance(s, URIRef)}


# -- the ontology file ---------------------------------------------------------------------------


def test_counts_in_the_file_and_the_model(graph: Graph, model: OntologyModel) -> None:
    assert len(_named(graph, OWL.Class)) == N_CLASSES
    assert len(_named(graph, OWL.ObjectProperty)) == N_OBJECT_PROPERTIES
    assert len(_named(graph, OWL.DatatypeProperty)) == N_DATA_PROPERTIES
    assert len(model.classes) == N_CLASSES
    assert len(model.object_properties) == N_OBJECT_PROPERTIES
    assert len(model.data_properties) == N_DATA_PROPERTIES


def test_every_term_is_in_the_oda_namespace(graph: Graph) -> None:
    terms = (
        _named(graph, OWL.Class)
        | _named(graph, OWL.ObjectProperty)
        | _named(graph, OWL.DatatypeProperty)
    )
    assert {t for t in terms if not str(t).startswith(ODA)} == set()


def test_names_fixed_by_the_lead_exist(model: OntologyModel) -> None:
    assert set(FIXED_CLASSES) - set(model.classes) == set()
    assert set(FIXED_OBJECT_PROPERTIES) - set(model.object_properties) == set()
    assert set(FIXED_DATA_PROPERTIES) - set(model.data_properties) == set()


def test_every_property_has_a_domain_and_a_range(graph: Graph) -> None:
    props = _named(graph, OWL.ObjectProperty) | _named(graph, OWL.DatatypeProperty)
    missing = [
        str(p)
        for p in props
        if graph.value(p, RDFS.domain) is None or not graph.value(p, RDFS.range)
    ]
    assert missing == []


def test_every_data_property_range_is_one_xsd_datatype(graph: Graph) -> None:
    for prop in _named(graph, OWL.DatatypeProperty):
        ranges = list(graph.objects(prop, RDFS.range))
        assert len(ranges) == 1, prop
        assert str(ranges[0]) in XSD_DATATYPES, (prop, ranges[0])


def test_object_property_ranges_are_declared_classes(model: OntologyModel) -> None:
    for prop in model.object_properties.values():
        for cls in prop.domain | prop.range:
            assert model.find_class(cls) is not None, (prop.name, cls)


def test_every_class_and_property_has_label_and_comment(model: OntologyModel) -> None:
    terms: list[OntClass | OntProperty] = [*model.classes.values(), *model.properties.values()]
    for term in terms:
        assert term.label, term.name
        assert term.comment, term.name


def test_labels_are_unique(model: OntologyModel) -> None:
    labels = [c.label.lower() for c in model.classes.values()]
    labels += [p.label.lower() for p in model.properties.values()]
    assert len(labels) == len(set(labels))


def test_top_classes_are_pairwise_disjoint(graph: Graph, model: OntologyModel) -> None:
    groups = [
        {str(m) for m in graph.items(members)}
        for g in graph.subjects(RDF.type, OWL.AllDisjointClasses)
        if (members := graph.value(g, OWL.members)) is not None
    ]
    assert {ODA + t for t in TOPS} in groups
    for a in TOPS:
        for b in TOPS:
            assert model.disjoint(a, b) is (a != b)


def test_every_class_is_under_exactly_one_layer(model: OntologyModel) -> None:
    outside = set()
    for name in model.classes:
        if name in TOPS:
            # A layer's only superclass is the union it belongs to.
            assert model.superclasses(name) - {ODA + "MonitoredEntity"} == {ODA + name}
            continue
        if model.top_class(name) is None:
            outside.add(name)
    # The one deliberate exception: the union of what a sensor can observe.
    assert outside == {"MonitoredEntity"}
    assert model.classes["MonitoredEntity"].union_of == {
        ODA + c for c in ("PhysicalEntity", "HPCSystem", "Job", "Weather", "CarbonIntensity")
    }


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("Sensor", "PhysicalEntity"),
        ("ElectricalPanel", "PhysicalEntity"),
        ("LiquidCoolingPLC", "PhysicalEntity"),
        ("SoftwareMetric", "LogicalEntity"),
        ("Reading", "LogicalEntity"),
        ("Time", "LogicalEntity"),
        ("CarbonIntensity", "ExternalEntity"),
    ],
)
def test_layer_of_a_class(model: OntologyModel, name: str, layer: str) -> None:
    assert model.top_class(name) == ODA + layer


def test_catalogue_entity_classes_can_be_observed(model: OntologyModel) -> None:
    observable = model.object_properties["observes"].range
    for name in CATALOGUE_ENTITIES:
        assert model.is_subclass(name, observable), name


def test_contains_is_transitive_and_confined_to_physical(model: OntologyModel) -> None:
    contains = model.object_properties["contains"]
    assert contains.transitive
    assert contains.domain == contains.range == {ODA + "PhysicalEntity"}
    subs = model.subproperties("contains")
    assert {ODA + p for p in ("hasRoom", "hasRack", "hasNode", "hasGPU", "hasEquipment")} <= subs
    for iri in subs:
        prop = model.require_property(iri)
        assert model.is_subclass(prop.domain, "PhysicalEntity"), prop.name
        assert model.is_subclass(prop.range, "PhysicalEntity"), prop.name
    # Only contains is transitive: a sub-property chain must not leak transitivity.
    assert [p.name for p in model.object_properties.values() if p.transitive] == ["contains"]


def test_observes_and_has_sensor_are_inverses(model: OntologyModel) -> None:
    observes, has_sensor = model.object_properties["observes"], model.object_properties["hasSensor"]
    assert observes.inverse == has_sensor.iri and has_sensor.inverse == observes.iri
    assert observes.domain == has_sensor.range == {ODA + "Sensor"}
    assert observes.range == has_sensor.domain == {ODA + "MonitoredEntity"}


# -- the model API -------------------------------------------------------------------------------


def test_names_resolve_in_all_spellings(model: OntologyModel) -> None:
    iri = ODA + "ComputeNode"
    for spelling in ("ComputeNode", "oda:ComputeNode", iri, f"<{iri}>"):
        found = model.find_class(spelling)
        assert found is not None and found.iri == iri
    assert model.find_class("Computenode") is None
    assert model.find_property("oda:runsOn") is model.object_properties["runsOn"]


def test_superclasses_and_subclasses(model: OntologyModel) -> None:
    assert model.superclasses("ElectricalPanel") == {
        ODA + c
        for c in (
            "ElectricalPanel", "SwitchBoard", "PowerEquipment", "Equipment", "PhysicalEntity",
            "MonitoredEntity",
        )
    }  # fmt: skip
    assert ODA + "ElectricalPanel" in model.subclasses("Equipment")
    assert ODA + "CRAC" not in model.subclasses("PowerEquipment")


def test_is_subclass_with_unions(model: OntologyModel) -> None:
    assert model.is_subclass("GPU", "PhysicalEntity")
    assert not model.is_subclass("PhysicalEntity", "GPU")
    assert model.is_subclass("Job", "MonitoredEntity")
    assert not model.is_subclass("User", "MonitoredEntity")
    component = model.object_properties["hasComponent"].range
    assert len(component) == 5
    assert model.is_subclass("GPU", component)
    assert model.is_subclass(component, "PhysicalEntity")
    assert not model.is_subclass("ComputeNode", component)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Job", "ComputeNode", True),  # through the layers
        ("GPU", "CPU", True),  # siblings of the physical layer
        ("CRAC", "ElectricalPanel", True),  # cooling vs power branch
        ("ElectricalPanel", "SwitchBoard", False),  # subclass
        ("Sensor", "PhysicalEntity", False),
        ("MonitoredEntity", "Metric", True),  # every member of the union is disjoint
        ("MonitoredEntity", "Job", False),
        ("MonitoredEntity", "User", True),
        ("Reading", "Time", True),
        ("Weather", "CarbonIntensity", True),
        ("Equipment", "CRAC", False),
    ],
)
def test_disjoint(model: OntologyModel, a: str, b: str, expected: bool) -> None:
    assert model.disjoint(a, b) is expected
    assert model.disjoint(b, a) is expected


def test_disjoint_with_a_union_range(model: OntologyModel) -> None:
    domain = model.object_properties["hasEquipment"].domain  # DataCenter or Room
    assert model.disjoint(domain, "Rack")
    assert not model.disjoint(domain, "Room")


def test_property_hierarchy_and_datatypes(model: OntologyModel) -> None:
    assert model.superproperties("hasGPU") == {
        ODA + "hasGPU",
        ODA + "hasComponent",
        ODA + "contains",
    }
    assert model.is_subproperty("hasNode", "contains")
    assert not model.is_subproperty("contains", "hasNode")
    assert model.is_transitive("contains") and not model.is_transitive("hasNode")
    assert model.datatype("timestamp") == str(xsd("dateTime"))
    assert model.datatype("oda:jobId") == str(xsd("integer"))
    assert model.data_properties["value"].datatype == str(xsd("double"))
    assert model.object_properties["runsOn"].datatype is None
    with pytest.raises(UnknownTermError):
        model.datatype("runsOn")


def test_union_domain_of_a_data_property(model: OntologyModel) -> None:
    memory = model.data_properties["memoryGB"]
    assert memory.domain == {ODA + c for c in ("ComputeNode", "GPU", "MemoryModule")}
    assert "memoryGB" in model.properties_of("GPU", "data")
    assert "memoryGB" not in model.properties_of("CPU", "data")


def test_properties_of_a_class(model: OntologyModel) -> None:
    reading = model.properties_of("Reading")
    assert set(reading) == {"fromSensor", "timestamp", "value", "textValue", "readingCount"}
    node_data = model.properties_of("ComputeNode", "data")
    assert {"nodeId", "slot", "model"} <= set(node_data)
    assert "jobId" not in node_data


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("ComputeNodes", "class", "ComputeNode"),
        ("node", "class", "ComputeNode"),  # alternative label
        ("compute_node", "class", "ComputeNode"),
        ("has_gpu", "object_property", "hasGPU"),
        ("runOn", "property", "runsOn"),
        ("job_id", "data_property", "jobId"),
        ("time stamp", "data_property", "timestamp"),
        ("oda:observeMetric", "any", "observesMetric"),
    ],
)
def test_nearest_suggests_the_intended_name(
    model: OntologyModel, name: str, kind: str, expected: str
) -> None:
    assert model.nearest(name, kind)[0] == expected  # type: ignore[arg-type]


def test_nearest_respects_the_kind(model: OntologyModel) -> None:
    assert "jobId" not in model.nearest("job", "class")
    assert all(n in model.data_properties for n in model.nearest("job", "data_property", n=5))


def test_unknown_names_raise_with_suggestions(model: OntologyModel) -> None:
    with pytest.raises(UnknownTermError) as info:
        model.require_class("Nodes")
    assert "ComputeNode" in (info.value.hint or "")
    assert isinstance(info.value, OntologyError)
    with pytest.raises(UnknownTermError):
        model.superclasses("oda:Server")
    with pytest.raises(UnknownTermError):
        model.is_subclass(frozenset({ODA + "Nope"}), "Job")


def test_model_is_immutable(model: OntologyModel) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.iri = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        model.classes["Foo"] = model.classes["Job"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.classes["Job"].label = "x"  # type: ignore[misc]


# -- loading -------------------------------------------------------------------------------------


def test_load_is_cached_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "oda.ttl"
    shutil.copy(ONTOLOGY_DIR / "oda.ttl", path)
    first = load_ontology(tmp_path)
    assert load_ontology(path) is first
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_ontology(path) is not first


def test_default_location_comes_from_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ONTOLOGY_DIR / "oda.ttl", tmp_path / "oda.ttl")
    monkeypatch.setenv("ODA_ONTOLOGY_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        assert load_ontology().source == (tmp_path / "oda.ttl").resolve()
    finally:
        get_settings.cache_clear()


def test_missing_file_raises_with_hint(tmp_path: Path) -> None:
    with pytest.raises(OntologyError) as info:
        load_ontology(tmp_path)
    assert "not found" in info.value.message
    assert "ODA_ONTOLOGY_DIR" in (info.value.hint or "")


def test_broken_turtle_raises(tmp_path: Path) -> None:
    (tmp_path / "oda.ttl").write_text("@prefix oda: <urn:x#> .\noda:A a owl:Class ;;; .\n")
    with pytest.raises(OntologyError) as info:
        load_ontology(tmp_path)
    assert "cannot parse" in info.value.message


def _base() -> Graph:
    return load_ontology_graph(ONTOLOGY_DIR)


def test_property_without_range_is_rejected() -> None:
    graph = _base()
    graph.remove((URIRef(ODA + "runsOn"), RDFS.range, None))
    with pytest.raises(OntologyError, match="runsOn has no rdfs:range"):
        build_model(graph)


def test_data_property_with_a_class_range_is_rejected() -> None:
    graph = _base()
    graph.set((URIRef(ODA + "jobId"), RDFS.range, URIRef(ODA + "Job")))
    with pytest.raises(OntologyError, match="not an XSD datatype"):
        build_model(graph)


def test_undeclared_class_in_a_domain_is_rejected() -> None:
    graph = _base()
    graph.set((URIRef(ODA + "runsOn"), RDFS.domain, URIRef(ODA + "Jobb")))
    with pytest.raises(OntologyError, match="undeclared class"):
        build_model(graph)


# -- OWL-RL consistency with sample instances ----------------------------------------------------


def _t(graph: Graph, s: str, p: str, o: str | Literal) -> None:
    graph.add((URIRef(s), URIRef(ODA + p), o if isinstance(o, Literal) else URIRef(o)))


def _a(graph: Graph, s: str, cls: str) -> None:
    graph.add((URIRef(s), RDF.type, URIRef(ODA + cls)))


def _reading(graph: Graph, sensor: str, epoch_ms: int, value: float) -> str:
    """A reading the way the VKG builder writes it: three triples, no rdf:type."""
    iri = ns.reading_iri(sensor, epoch_ms)
    _t(graph, iri, "fromSensor", sensor)
    stamp = f"2022-06-01T08:00:{epoch_ms // 1000 % 60:02d}Z"
    _t(graph, iri, "timestamp", Literal(stamp, datatype=xsd("dateTime")))
    _t(graph, iri, "value", Literal(value, datatype=xsd("double")))
    return iri


def _sensor(graph: Graph, plugin: str, metric: str, key: ns.EntityKey, entity: str) -> str:
    iri = ns.sensor_iri(plugin, metric, key)
    _a(graph, iri, "Sensor")
    _t(graph, iri, "observes", entity)
    _t(graph, iri, "observesMetric", ns.metric_iri(plugin, metric))
    return iri


def sample_instances() -> Graph:
    """A data centre, room, two racks, nodes with GPUs and sensors, readings, a job on two nodes,
    a user, weather readings and a cluster metric."""
    g = Graph()
    dc, room = ns.datacenter_iri(), ns.room_iri()
    _a(g, dc, "DataCenter")
    _t(g, dc, "hasRoom", room)
    _a(g, room, "Room")
    for rack, nodes in ((45, (900, 901)), (46, (920,))):
        _a(g, ns.rack_iri(rack), "Rack")
        _t(g, room, "hasRack", ns.rack_iri(rack))
        _t(g, ns.rack_iri(rack), "rackId", Literal(rack))
        for node in nodes:
            _a(g, ns.node_iri(node), "ComputeNode")
            _t(g, ns.rack_iri(rack), "hasNode", ns.node_iri(node))
            _t(g, ns.node_iri(node), "nodeId", Literal(node))
            for gpu in range(4):
                _t(g, ns.node_iri(node), "hasGPU", ns.gpu_iri(node, gpu))
                _t(g, ns.gpu_iri(node, gpu), "gpuIndex", Literal(gpu))
            _t(g, ns.node_iri(node), "hasCPU", ns.cpu_iri(node, 0))
    _t(g, room, "hasEquipment", ns.crac_iri("CDZ01"))
    _a(g, ns.crac_iri("CDZ01"), "CRAC")
    _t(g, ns.crac_iri("CDZ01"), "cools", room)
    system, wlm = ns.system_iri(), ns.wlm_iri()
    _a(g, system, "HPCSystem")
    _t(g, system, "hostedIn", dc)
    _t(g, system, "hasComputeNode", ns.node_iri(900))
    _t(g, wlm, "schedules", system)
    for plugin, metric, cls in (
        ("ipmi", "total_power", "Metric"),
        ("ganglia", "Gpu0_gpu_utilization", "SoftwareMetric"),
        ("weather", "temp", "Metric"),
        ("slurm", "cluster_cpu_util", "SoftwareMetric"),
    ):
        _a(g, ns.metric_iri(plugin, metric), cls)
        _t(g, ns.metric_iri(plugin, metric), "plugin", Literal(plugin))
    power = _sensor(g, "ipmi", "total_power", 900, ns.node_iri(900))
    gpu_util = _sensor(g, "ganglia", "Gpu0_gpu_utilization", 920, ns.gpu_iri(920, 0))
    weather = _sensor(g, "weather", "temp", "bologna", ns.weather_iri())
    cluster = _sensor(g, "slurm", "cluster_cpu_util", "M100", system)
    _a(g, ns.weather_iri(), "Weather")
    _t(g, ns.weather_iri(), "locatedAt", dc)
    for i, sensor in enumerate((power, gpu_util, weather, cluster)):
        for k in range(3):
            _reading(g, sensor, 1654070400000 + 20000 * k, 10.0 * i + k)
    job, user = ns.job_iri(3423336), ns.user_iri(1234)
    _a(g, job, "Job")
    _t(g, job, "jobId", Literal(3423336))
    _t(g, job, "runsOn", ns.node_iri(900))
    _t(g, job, "runsOn", ns.node_iri(920))
    _t(g, job, "submittedBy", user)
    _t(g, job, "managedBy", wlm)
    _t(g, user, "userId", Literal(1234))
    return g


# Deliberately wrong individuals: case -> (the individual owlrl must flag, its triples).
_J, _T = URIRef(ODA + "Job"), RDF.type
WRONG: dict[str, tuple[str, list[tuple[str, URIRef, URIRef]]]] = {
    "typed_job_and_node": (
        "urn:wrong:1",
        [("urn:wrong:1", _T, _J), ("urn:wrong:1", _T, URIRef(ODA + "ComputeNode"))],
    ),
    "job_runs_on_a_user": (  # the range of runsOn makes the user a ComputeNode
        "urn:wrong:2",
        [
            ("urn:wrong:2", _T, URIRef(ODA + "User")),
            ("urn:wrong:job2", URIRef(ODA + "runsOn"), URIRef("urn:wrong:2")),
        ],
    ),
    "reading_used_as_sensor": (  # domain Reading and range Sensor on one individual
        "urn:wrong:3",
        [
            ("urn:wrong:3", URIRef(ODA + "fromSensor"), URIRef("urn:wrong:s3")),
            ("urn:wrong:r3", URIRef(ODA + "fromSensor"), URIRef("urn:wrong:3")),
        ],
    ),
    "rack_contains_a_job": (  # contains is confined to physical entities
        "urn:wrong:4",
        [
            ("urn:wrong:rack4", URIRef(ODA + "contains"), URIRef("urn:wrong:4")),
            ("urn:wrong:4", _T, _J),
        ],
    ),
    "crac_that_is_a_panel": (  # cooling and power branches are disjoint
        "urn:wrong:5",
        [
            ("urn:wrong:5", _T, URIRef(ODA + "CRAC")),
            ("urn:wrong:5", _T, URIRef(ODA + "ElectricalPanel")),
        ],
    ),
}


def _closure(instances: Graph) -> Graph:
    graph = load_ontology_graph(ONTOLOGY_DIR)
    graph += instances
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(graph)
    return graph


# owlrl 7.x checks xsd:double/float with `1e-330 < abs(v)`, so it calls every zero reading (an idle
# GPU at 0 %) a lexical error. Only that false positive is ignored.
_ZERO_LEXICAL = re.compile(
    r"Lexical value of the literal '([^']*)' does not match its datatype "
    r"\(http://www\.w3\.org/2001/XMLSchema#(?:double|float)\)"
)


def _is_owlrl_zero_quirk(message: str) -> bool:
    match = _ZERO_LEXICAL.fullmatch(message)
    return match is not None and float(match.group(1)) == 0.0


def _errors(graph: Graph) -> list[str]:
    messages = [str(m) for m in graph.objects(None, ERRNS.error)]
    return [m for m in messages if not _is_owlrl_zero_quirk(m)]


@pytest.fixture(scope="module")
def sample() -> Graph:
    return sample_instances()


@pytest.fixture(scope="module")
def closed(sample: Graph) -> Graph:
    return _closure(sample)


@pytest.fixture(scope="module")
def closed_wrong(sample: Graph) -> Graph:
    graph = Graph()
    graph += sample
    for _, triples in WRONG.values():
        for s, p, o in triples:
            graph.add((URIRef(s), p, o))
    return _closure(graph)


def test_sample_instances_are_consistent(closed: Graph) -> None:
    assert _errors(closed) == []
    assert list(closed.subjects(RDF.type, OWL.Nothing)) == []
    assert (URIRef(ODA + "Reading"), RDFS.subClassOf, OWL.Nothing) not in closed


def test_contains_is_inferred_transitively(closed: Graph) -> None:
    contains = URIRef(ODA + "contains")
    dc = URIRef(ns.datacenter_iri())
    assert (dc, contains, URIRef(ns.gpu_iri(900, 3))) in closed
    assert (URIRef(ns.room_iri()), contains, URIRef(ns.cpu_iri(920, 0))) in closed
    assert (dc, contains, URIRef(ns.crac_iri("CDZ01"))) in closed
    assert (URIRef(ns.rack_iri(46)), contains, URIRef(ns.node_iri(900))) not in closed


def test_contains_stays_inside_the_physical_layer(closed: Graph) -> None:
    physical = URIRef(ODA + "PhysicalEntity")
    pairs = list(closed.subject_objects(URIRef(ODA + "contains")))
    assert len(pairs) > 40
    for s, o in pairs:
        assert (s, RDF.type, physical) in closed and (o, RDF.type, physical) in closed


def test_untyped_readings_are_typed_by_the_domain(sample: Graph, closed: Graph) -> None:
    readings = set(sample.subjects(URIRef(ODA + "fromSensor"), None))
    assert len(readings) == 12
    assert (None, URIRef(ODA + "value"), Literal(0.0, datatype=xsd("double"))) in sample
    assert all((r, RDF.type, None) not in sample for r in readings)
    assert all((r, RDF.type, URIRef(ODA + "Reading")) in closed for r in readings)


def test_observed_entities_are_monitored_entities(closed: Graph) -> None:
    monitored = URIRef(ODA + "MonitoredEntity")
    for entity in (ns.node_iri(900), ns.gpu_iri(920, 0), ns.weather_iri(), ns.system_iri()):
        assert (URIRef(entity), RDF.type, monitored) in closed
    assert (URIRef(ns.node_iri(900)), URIRef(ODA + "hasSensor"), None) in closed


@pytest.mark.parametrize("case", sorted(WRONG))
def test_wrong_instances_are_detected(closed_wrong: Graph, case: str) -> None:
    individual = WRONG[case][0]
    messages = [m for m in _errors(closed_wrong) if individual in m]
    assert messages, f"{case}: no inconsistency reported for {individual}"


def test_wrong_instances_leave_the_sample_alone(closed_wrong: Graph) -> None:
    flagged = " ".join(_errors(closed_wrong))
    assert ns.INSTANCE_NS not in flagged


# -- IRI conventions -----------------------------------------------------------------------------

M100 = ns.INSTANCE_NS


@pytest.mark.parametrize(
    ("iri", "expected"),
    [
        (ns.node_iri(900), "node/900"),
        (ns.rack_iri(45), "rack/45"),
        (ns.room_iri(), "room/M100-room"),
        (ns.datacenter_iri(), "datacenter/CINECA"),
        (ns.gpu_iri(900, 0), "gpu/900/0"),
        (ns.cpu_iri(900, 1), "cpu/900/1"),
        (ns.job_iri(3423336), "job/3423336"),
        (ns.user_iri(1234), "user/1234"),
        (ns.metric_iri("ipmi", "total_power"), "metric/ipmi/total_power"),
        (ns.metric_iri("ipmi_pub", "total_power"), "metric/ipmi/total_power"),
        (ns.sensor_iri("ipmi", "total_power", 900), "sensor/ipmi/total_power/900"),
        (
            ns.sensor_iri("logics", "Energia", ("QGBT1", "main_ict")),
            "sensor/logics/Energia/QGBT1/main_ict",
        ),
        (ns.crac_iri("CDZ01"), "crac/CDZ01"),
        (ns.plc_iri("Q101"), "plc/Q101"),
        (ns.panel_iri("QGBT1", "main_ict"), "panel/QGBT1/main_ict"),
        (ns.weather_iri(), "weather/bologna"),
        (ns.system_iri(), "system/M100"),
        (ns.wlm_iri(), "wlm/slurm"),
        (
            ns.metric_iri("schneider", "PLC_PLC_Q101.Temp_mandata"),
            "metric/schneider/PLC_PLC_Q101.Temp_mandata",
        ),
    ],
)  # fmt: skip
def test_instance_iris(iri: str, expected: str) -> None:
    assert iri == M100 + expected


def test_iri_segments_are_encoded_and_decoded() -> None:
    iri = ns.sensor_iri("nagios", "state", (900, "alive::ping"))
    assert iri == M100 + "sensor/nagios/state/900/alive%3A%3Aping"
    assert ns.split_instance_iri(iri) == ("sensor", "nagios", "state", "900", "alive::ping")
    assert ns.split_instance_iri(ns.panel_iri("Q 1", "a/b")) == ("panel", "Q 1", "a/b")
    assert ns.entity_key_text(("QGBT1", "main_ict")) == "QGBT1/main_ict"
    with pytest.raises(UsageError):
        ns.split_instance_iri(ODA + "Job")


# Every builder, called with typical arguments, and the class and decoded parts its IRI reads as.
_SENSOR_900 = ns.sensor_iri("ipmi", "total_power", 900)
ROUND_TRIPS = [
    (ns.datacenter_iri(), "DataCenter", ("CINECA",)),
    (ns.room_iri(), "Room", ("M100-room",)),
    (ns.rack_iri(45), "Rack", ("45",)),
    (ns.node_iri(900), "ComputeNode", ("900",)),
    (ns.gpu_iri(900, 3), "GPU", ("900", "3")),
    (ns.cpu_iri(900, 1), "CPU", ("900", "1")),
    (ns.memory_iri(900, 15), "MemoryModule", ("900", "15")),
    (ns.fan_iri(900, 2), "Fan", ("900", "2")),
    (ns.psu_iri(900, 1), "PowerSupply", ("900", "1")),
    (ns.crac_iri("CDZ01"), "CRAC", ("CDZ01",)),
    (ns.plc_iri("Q101"), "LiquidCoolingPLC", ("Q101",)),
    (ns.panel_iri("QGBT1", "main ict/2"), "ElectricalPanel", ("QGBT1", "main ict/2")),
    (ns.system_iri(), "HPCSystem", ("M100",)),
    (ns.wlm_iri(), "WorkloadManager", ("slurm",)),
    (ns.job_iri(3423336), "Job", ("3423336",)),
    (ns.user_iri(1234), "User", ("1234",)),
    (ns.weather_iri(), "Weather", ("bologna",)),
    (ns.carbon_iri("IT-NORD"), "CarbonIntensity", ("IT-NORD",)),
    (ns.time_iri(1654041600000, 1654128000000), "Time", ("1654041600000", "1654128000000")),
    (ns.metric_iri("schneider_pub", "PLC_PLC_Q101.Temp_mandata"), "Metric",
     ("schneider", "PLC_PLC_Q101.Temp_mandata")),
    (_SENSOR_900, "Sensor", ("ipmi", "total_power", "900")),
    (ns.sensor_iri("nagios", "state", (900, "alive::ping")), "Sensor",
     ("nagios", "state", "900", "alive::ping")),
    (ns.reading_iri(_SENSOR_900, 1654070400000), "Reading",
     (ns.split_instance_iri(ns.reading_iri(_SENSOR_900, 0))[1], "1654070400000")),
]  # fmt: skip


@pytest.mark.parametrize(("iri", "cls", "parts"), ROUND_TRIPS, ids=[r[1] for r in ROUND_TRIPS])
def test_builder_iris_round_trip_through_instance_kind(
    iri: str, cls: str, parts: tuple[str, ...]
) -> None:
    assert ns.instance_kind(iri) == (cls, parts)
    assert ns.check_instance_iri(iri) == (cls, parts)
    assert ns.split_instance_iri(iri)[1:] == parts
    assert load_ontology().find_class(ns.oda(cls)) is not None


def test_round_trips_cover_every_builder_and_kind() -> None:
    builders = {n for n in dir(ns) if n.endswith("_iri") and n not in ("instance_iri",)}
    builders -= {"split_instance_iri", "check_instance_iri"}
    kinds = {ns.split_instance_iri(iri)[0] for iri, _, _ in ROUND_TRIPS}
    assert kinds == set(ns.INSTANCE_KINDS)
    assert {b.removesuffix("_iri") for b in builders} == kinds - {"r"} | {"reading"}


@pytest.mark.parametrize(
    "iri",
    [
        M100 + "nodes/900",  # unknown kind
        M100 + "node/900/1",  # too many segments
        M100 + "gpu/900",  # too few
        M100 + "sensor/ipmi/total_power",  # a sensor needs a key segment
        M100 + "node/abc",  # integer ids
        M100 + "node/%39%30%30",  # 900, but not the IRI node_iri builds
        M100 + "panel/QGBT1/",  # empty segment
        M100,
        ODA + "ComputeNode",
        "http://example.org/node/900",
    ],
)
def test_malformed_instance_iris_have_no_kind(iri: str) -> None:
    assert ns.instance_kind(iri) is None
    with pytest.raises(UsageError):
        ns.check_instance_iri(iri)


def test_reading_iris_are_stable_and_distinct() -> None:
    s1, s2 = ns.sensor_iri("ipmi", "total_power", 900), ns.sensor_iri("ipmi", "total_power", 901)
    r = ns.reading_iri(s1, 1654070400000)
    assert r == ns.reading_iri(s1, 1654070400000)
    assert r.startswith(M100 + "r/") and r.endswith("/1654070400000")
    assert len({r, ns.reading_iri(s2, 1654070400000), ns.reading_iri(s1, 1654070420000)}) == 3


@pytest.mark.parametrize("bad", [-1, True, "900"])
def test_bad_ids_are_rejected(bad: object) -> None:
    with pytest.raises(UsageError):
        ns.node_iri(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        ns.sensor_iri("ipmi", "total_power", ())


def test_sparql_prefixes_cover_the_namespaces() -> None:
    text = ns.sparql_prefixes()
    assert f"PREFIX oda: <{ODA}>" in text and f"PREFIX m100: <{M100}>" in text
    assert ns.oda("Job") == ODA + "Job"
