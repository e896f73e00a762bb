"""Static triples of the M100 topology, facility, metrics and sensors, written once per entity.

``StaticGraph`` is shared by the base knowledge graph (everything) and the per-query VKG builder
(only the grounded entities): adding an entity also adds the chain that contains it (GPU -> node
-> rack -> room -> data centre), so every graph it writes satisfies the containment shapes of
``ontology/shapes.ttl`` on its own. Every IRI comes from ``oda_analyst.ontology.namespaces``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError, UsageError
from oda_analyst.lake.topology import (
    CORES_PER_SOCKET,
    CPU_SOCKETS_PER_NODE,
    DIMMS_PER_NODE,
    FANS_PER_NODE,
    GPUS_PER_NODE,
    IPMI_GPU_INDEX,
    LOGICS_DEVICES,
    MEMORY_GB_PER_NODE,
    N_NODES,
    POWER_SUPPLIES_PER_NODE,
    SCHNEIDER_PANELS,
    VERTIV_DEVICES,
    rack_of,
    rack_position,
    slot_of,
)
from oda_analyst.ontology import namespaces as ns
from oda_analyst.ontology.catalogue import Catalogue, MetricInfo, load_catalogue
from oda_analyst.vkg.ntriples import (
    RDF_TYPE,
    RDFS_LABEL,
    double_lit,
    int_lit,
    iri,
    lines_to_ntriples,
    oda,
    string_lit,
    triple,
)
from oda_analyst.vkg.protocol import GraphStore

# Plugins whose rows carry a node tag; their sensors are keyed by node id.
NODE_PLUGINS = frozenset({"ipmi", "ganglia", "nagios"})
PART_KINDS = ("GPU", "CPU", "MemoryModule", "Fan", "PowerSupply")
PART_COUNTS = {
    "CPU": CPU_SOCKETS_PER_NODE,
    "GPU": GPUS_PER_NODE,
    "MemoryModule": DIMMS_PER_NODE,
    "Fan": FANS_PER_NODE,
    "PowerSupply": POWER_SUPPLIES_PER_NODE,
}
SOFTWARE_PLUGINS = frozenset({"ganglia", "slurm", "nagios"})
_SCALED_UNIT = re.compile(r"^\s*([0-9.]+)\s+(\S.*)$")


def metric_class(info: MetricInfo) -> str:
    """oda:Metric subclass of a catalogue metric (JobMetric / SoftwareMetric / Metric)."""
    if info.entity == "Job":
        return "JobMetric"
    return "SoftwareMetric" if info.plugin in SOFTWARE_PLUGINS else "Metric"


def scale_factor(unit: str) -> float | None:
    """``"0.1 °C"`` -> 10.0 (the raw value counts tenths); None for a plain unit."""
    match = _SCALED_UNIT.match(unit)
    if not match:
        return None
    quantum = float(match.group(1))
    return round(1.0 / quantum, 9) if quantum > 0 else None


class StaticGraph:
    """Lines of static triples; each entity is written once, with its containers."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._done: set[str] = set()

    def __len__(self) -> int:
        return len(self.lines)

    def _first(self, key: str) -> bool:
        if key in self._done:
            return False
        self._done.add(key)
        return True

    def _add(self, s: str, p: str, o: str) -> None:
        self.lines.append(triple(s, p, o))

    def _entity(self, subject: str, cls: str, label: str) -> None:
        self._add(subject, RDF_TYPE, oda(cls))
        self._add(subject, RDFS_LABEL, string_lit(label))

    # -- site ---------------------------------------------------------------------------

    def datacenter(self) -> str:
        dc = iri(ns.datacenter_iri())
        if self._first(dc):
            self._entity(dc, "DataCenter", ns.DEFAULT_DATACENTER)
        return dc

    def room(self) -> str:
        room = iri(ns.room_iri())
        if self._first(room):
            self._entity(room, "Room", ns.DEFAULT_ROOM)
            self._add(self.datacenter(), oda("hasRoom"), room)
        return room

    def system(self) -> str:
        system = iri(ns.system_iri())
        if self._first(system):
            self._entity(system, "HPCSystem", f"{ns.DEFAULT_SYSTEM} (Marconi100)")
            self._add(system, oda("systemName"), string_lit(ns.DEFAULT_SYSTEM))
            self._add(system, oda("nodeCount"), int_lit(N_NODES))
            self._add(system, oda("hostedIn"), self.datacenter())
            wlm = iri(ns.wlm_iri())
            self._entity(wlm, "WorkloadManager", "Slurm")
            self._add(wlm, oda("softwareName"), string_lit(ns.DEFAULT_WLM))
            self._add(wlm, oda("schedules"), system)
        return system

    def wlm(self) -> str:
        self.system()
        return iri(ns.wlm_iri())

    def rack(self, rack: int) -> str:
        subject = iri(ns.rack_iri(rack))
        if self._first(subject):
            self._entity(subject, "Rack", f"rack {rack}")
            self._add(subject, oda("rackId"), int_lit(rack))
            try:
                row, column = rack_position(rack)
            except UsageError:  # racks beyond the published layout (ids 980+) have no position
                pass
            else:
                self._add(subject, oda("row"), int_lit(row))
                self._add(subject, oda("column"), int_lit(column))
            self._add(self.room(), oda("hasRack"), subject)
        return subject

    # -- nodes and parts ----------------------------------------------------------------

    def node(self, node: int) -> str:
        subject = _node_term(node)
        if self._first(subject):
            self.lines.extend(_node_lines(node))
            self._add(self.rack(rack_of(node)), oda("hasNode"), subject)
            self._add(self.system(), oda("hasComputeNode"), subject)
        return subject

    def part(self, kind: str, node: int, index: int) -> str:
        """A GPU, CPU, MemoryModule, Fan or PowerSupply of a node, by its catalogue index."""
        builders = {
            "GPU": (ns.gpu_iri, "hasGPU", "gpuIndex", "GPU"),
            "CPU": (ns.cpu_iri, "hasCPU", "socketIndex", "CPU"),
            "MemoryModule": (ns.memory_iri, "hasMemory", "dimmIndex", "DIMM"),
            "Fan": (ns.fan_iri, "hasFan", "fanIndex", "fan"),
            "PowerSupply": (ns.psu_iri, "hasPowerSupply", "psuIndex", "power supply"),
        }
        make, edge, index_prop, label = builders[kind]
        subject = iri(make(node, index))
        if self._first(subject):
            self._entity(subject, kind, f"{label} {index} of node {node}")
            self._add(subject, oda(index_prop), int_lit(index))
            if kind == "GPU":
                if index < len(IPMI_GPU_INDEX):
                    self._add(subject, oda("ipmiGpuIndex"), int_lit(IPMI_GPU_INDEX[index]))
                self._add(subject, oda("model"), string_lit("NVIDIA V100 16GB"))
                self._add(subject, oda("memoryGB"), int_lit(16))
            elif kind == "CPU":
                self._add(subject, oda("model"), string_lit("IBM POWER9"))
                self._add(subject, oda("numCores"), int_lit(CORES_PER_SOCKET))
            self._add(self.node(node), oda(edge), subject)
        return subject

    # -- facility and environment -------------------------------------------------------

    def crac(self, device: str) -> str:
        subject = iri(ns.crac_iri(device))
        if self._first(subject):
            self._entity(subject, "CRAC", f"CRAC {device}")
            self._add(subject, oda("deviceId"), string_lit(device))
            self._add(subject, oda("manufacturer"), string_lit("Vertiv"))
            self._add(self.room(), oda("hasEquipment"), subject)
            self._add(subject, oda("cools"), self.room())
        return subject

    def plc(self, panel: str) -> str:
        subject = iri(ns.plc_iri(panel))
        if self._first(subject):
            self._entity(subject, "LiquidCoolingPLC", f"liquid-cooling PLC {panel}")
            self._add(subject, oda("panelId"), string_lit(panel))
            self._add(subject, oda("manufacturer"), string_lit("Schneider"))
            self._add(self.room(), oda("hasEquipment"), subject)
            self._add(subject, oda("cools"), self.room())
        return subject

    def panel(self, panel: str, device: str) -> str:
        subject = iri(ns.panel_iri(panel, device))
        if self._first(subject):
            self._entity(subject, "ElectricalPanel", f"electrical panel {panel} {device}")
            self._add(subject, oda("panelId"), string_lit(panel))
            self._add(subject, oda("deviceId"), string_lit(device))
            self._add(self.datacenter(), oda("hasEquipment"), subject)
        return subject

    def weather(self) -> str:
        subject = iri(ns.weather_iri())
        if self._first(subject):
            self._entity(subject, "Weather", "weather at Bologna")
            self._add(subject, oda("locationName"), string_lit("Bologna"))
            self._add(subject, oda("latitude"), double_lit(44.4949))
            self._add(subject, oda("longitude"), double_lit(11.3426))
            self._add(subject, oda("locatedAt"), self.datacenter())
        return subject

    # -- metrics and sensors ------------------------------------------------------------

    def metric(self, info: MetricInfo) -> str:
        subject = iri(ns.metric_iri(info.plugin, info.name))
        if self._first(subject):
            cls = metric_class(info)
            self._add(subject, RDF_TYPE, oda("Metric"))
            if cls != "Metric":
                self._add(subject, RDF_TYPE, oda(cls))
            self._add(subject, RDFS_LABEL, string_lit(f"{info.plugin} {info.name}"))
            self._add(subject, oda("metricName"), string_lit(info.name))
            self._add(subject, oda("plugin"), string_lit(info.plugin))
            self._add(subject, oda("unit"), string_lit(info.unit))
            self._add(subject, oda("quantity"), string_lit(info.kind))
            if info.period_s is not None:
                self._add(subject, oda("samplingPeriod"), double_lit(info.period_s))
            if info.dtype != "none":
                self._add(subject, oda("valueType"), string_lit(info.dtype))
            factor = scale_factor(info.unit)
            if factor is not None:
                self._add(subject, oda("scaleFactor"), double_lit(factor))
        return subject

    def observed_entity(self, info: MetricInfo, key: tuple[str, ...]) -> str:
        """The entity a sensor of ``info`` with tag key ``key`` observes (added if new).

        Node plugins: key[0] is the node id and the catalogue's entity/entity_index pick the node
        or its part; vertiv: (device,); schneider: (panel,); logics: (panel, device); weather and
        slurm: the weather station and the HPC system whatever the tags.
        """
        if info.plugin in NODE_PLUGINS:
            node = int(key[0])
            if info.entity in PART_KINDS and info.entity_index is not None:
                return self.part(info.entity, node, info.entity_index)
            return self.node(node)
        if info.plugin == "vertiv":
            return self.crac(key[0])
        if info.plugin == "schneider":
            return self.plc(key[0])
        if info.plugin == "logics":
            return self.panel(key[0], key[1])
        if info.plugin == "weather":
            return self.weather()
        return self.system()

    def sensor(self, info: MetricInfo, key: tuple[str, ...]) -> str:
        """The sensor of one (entity, metric): ``m100:sensor/<plugin>/<metric>/<key...>``."""
        subject = _sensor_term(info.plugin, info.name, key)
        if self._first(subject):
            entity = self.observed_entity(info, key)
            self.lines.extend(_sensor_lines(subject, info.name, key, entity, self.metric(info)))
        return subject


# Lines of one entity depend on its key alone: a graph of all nodes writes ~15 lines for each of
# 980 nodes and as many sensors per metric, on every build. Each block is formatted once per
# process (bounded caches: the topology has 980 nodes, a few hundred metrics).
_CACHE_ENTRIES = 1 << 16


@lru_cache(maxsize=_CACHE_ENTRIES)
def _node_term(node: int) -> str:
    return iri(ns.node_iri(node))


@lru_cache(maxsize=_CACHE_ENTRIES)
def _node_lines(node: int) -> tuple[str, ...]:
    """A node's own triples (its rack and system edges are written by ``StaticGraph.node``)."""
    subject = _node_term(node)
    return (
        triple(subject, RDF_TYPE, oda("ComputeNode")),
        triple(subject, RDFS_LABEL, string_lit(f"node {node}")),
        triple(subject, oda("nodeId"), int_lit(node)),
        triple(subject, oda("slot"), int_lit(slot_of(node))),
        triple(subject, oda("model"), string_lit("IBM AC922")),
        triple(subject, oda("memoryGB"), int_lit(MEMORY_GB_PER_NODE)),
    )


@lru_cache(maxsize=_CACHE_ENTRIES)
def _sensor_term(plugin: str, metric: str, key: tuple[str, ...]) -> str:
    return iri(ns.sensor_iri(plugin, metric, key))


@lru_cache(maxsize=_CACHE_ENTRIES)
def _sensor_lines(
    subject: str, metric: str, key: tuple[str, ...], entity: str, metric_term: str
) -> tuple[str, ...]:
    """A sensor's triples, with the inverse edge from the entity it observes."""
    key_text = ns.entity_key_text(key)
    return (
        triple(subject, RDF_TYPE, oda("Sensor")),
        triple(subject, RDFS_LABEL, string_lit(f"{metric} of {key_text}")),
        triple(subject, oda("observes"), entity),
        triple(subject, oda("observesMetric"), metric_term),
        triple(subject, oda("entityKey"), string_lit(key_text)),
        triple(entity, oda("hasSensor"), subject),
    )


def sensor_key(info: MetricInfo, tags: dict[str, str | None]) -> tuple[str, ...]:
    """Sensor key of a row's tag values (``node`` for node plugins, with nagios' check)."""
    if info.plugin in ("ipmi", "ganglia"):
        return (str(tags["node"]),)
    if info.plugin == "nagios":
        return (str(tags["node"]), str(tags.get("description") or "host"))
    if info.plugin == "vertiv":
        return (str(tags["device"]),)
    if info.plugin == "schneider":
        return (str(tags["panel"]),)
    if info.plugin == "logics":
        return (str(tags["panel"]), str(tags["device"]))
    if info.plugin == "weather":
        return (ns.DEFAULT_WEATHER,)
    # slurm: one series per combination of its tags (partition, qos, state, ...).
    return (ns.DEFAULT_SYSTEM, *(str(v) for v in tags.values() if v is not None))


def sensor_tag_columns(info: MetricInfo, tags: tuple[str, ...]) -> tuple[str, ...]:
    """The tag columns that identify a sensor's series among a metric's rows."""
    if info.plugin in ("ipmi", "ganglia"):
        return ("node",)
    if info.plugin == "nagios":
        return ("node", "description")
    if info.plugin == "weather":
        return ()
    return tags


# -- the base knowledge graph ----------------------------------------------------------------

BASE_GRAPH = ns.INSTANCE_NS + "graph/base"
# Bump when the shape of the generated triples changes (part of the version hash).
BASE_FORMAT = "base-kg/1"
_VERSION_PREDICATE = "<http://www.w3.org/2002/07/owl#versionInfo>"


def _sensor_keys(info: MetricInfo, nodes: Iterable[int]) -> Iterator[tuple[str, ...]]:
    """Sensor keys of a metric over the topology (slurm: the system; nagios: host check)."""
    if info.plugin in ("ipmi", "ganglia"):
        yield from ((str(n),) for n in nodes)
    elif info.plugin == "nagios":
        yield from ((str(n), "host") for n in nodes)
    elif info.plugin == "vertiv":
        yield from ((d,) for d in VERTIV_DEVICES)
    elif info.plugin == "schneider":
        yield from ((p,) for p in SCHNEIDER_PANELS)
    elif info.plugin == "logics":
        yield from LOGICS_DEVICES
    elif info.plugin == "weather":
        yield (ns.DEFAULT_WEATHER,)
    elif info.plugin == "slurm":
        yield (ns.DEFAULT_SYSTEM,)


def base_static(
    catalogue: Catalogue, *, nodes: Iterable[int] = range(N_NODES), node_sensors: bool = False
) -> StaticGraph:
    """Every entity of the topology and facility, every metric, and the sensors.

    Sensors of facility, weather and cluster metrics are always written (about 800). The
    ~276k node-level sensors (280 IPMI/Ganglia metrics x 980 nodes, 1.4M triples) only with
    ``node_sensors``: their IRIs are deterministic, so each VKG writes the sensors of its own
    grounded entities instead, and the base graph stays small enough to load in a second.
    """
    node_list = list(nodes)
    static = StaticGraph()
    static.system()
    for node in node_list:
        static.node(node)
        for kind, count in PART_COUNTS.items():
            for index in range(count):
                static.part(kind, node, index)
    for device in VERTIV_DEVICES:
        static.crac(device)
    for panel in SCHNEIDER_PANELS:
        static.plc(panel)
    for panel, device in LOGICS_DEVICES:
        static.panel(panel, device)
    static.weather()
    for info in catalogue:
        static.metric(info)
        if info.dtype == "none" or (info.plugin in NODE_PLUGINS and not node_sensors):
            continue
        for key in _sensor_keys(info, node_list):
            static.sensor(info, key)
    return static


def base_version(catalogue: Catalogue, ontology_dir: Path | None = None, **options: object) -> str:
    """Hash of the catalogue, oda.ttl, the format and the options: a new one rebuilds the base."""
    folder = ontology_dir or get_settings().ontology_dir
    digest = hashlib.sha256(BASE_FORMAT.encode())
    for info in catalogue:
        digest.update(json.dumps(info.as_dict(), sort_keys=True).encode())
    try:
        digest.update((folder / "oda.ttl").read_bytes())
    except OSError as exc:
        raise OntologyError(
            f"cannot read {folder / 'oda.ttl'}: {exc.strerror}", hint="set ODA_ONTOLOGY_DIR"
        ) from None
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]


def build_base_kg(
    catalogue: Catalogue | None = None,
    *,
    nodes: Iterable[int] = range(N_NODES),
    node_sensors: bool = False,
    version: str | None = None,
) -> bytes:
    """The base knowledge graph as N-Triples (with a version triple when ``version`` is set)."""
    cat = catalogue or load_catalogue()
    static = base_static(cat, nodes=nodes, node_sensors=node_sensors)
    if version is not None:
        static.lines.append(triple(iri(BASE_GRAPH), _VERSION_PREDICATE, string_lit(version)))
    return lines_to_ntriples(static.lines)


@dataclass(frozen=True)
class BaseLoad:
    version: str
    loaded: bool  # False: the store already held this version
    triples: int
    seconds: float


def load_base_kg(
    store: GraphStore,
    catalogue: Catalogue | None = None,
    *,
    node_sensors: bool = False,
    force: bool = False,
) -> BaseLoad:
    """Load the base graph into ``m100:graph/base`` unless this version is already there."""
    started = time.perf_counter()
    cat = catalogue or load_catalogue()
    version = base_version(cat, node_sensors=node_sensors)
    base = iri(BASE_GRAPH)
    marker = f"ASK {{ GRAPH {base} {{ {base} {_VERSION_PREDICATE} {string_lit(version)} }} }}"
    if not force and store.query(marker).boolean:
        return BaseLoad(version, False, 0, time.perf_counter() - started)
    data = build_base_kg(cat, node_sensors=node_sensors, version=version)
    store.drop_graph(BASE_GRAPH)
    triples = store.load_ntriples(BASE_GRAPH, data)
    return BaseLoad(version, True, triples, time.perf_counter() - started)
