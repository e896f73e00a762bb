"""Namespaces and IRI conventions of the ontology and of M100 instance data.

Every layer (base knowledge graph, per-query VKG builder, plan compiler, label rewriting) builds
instance IRIs through these functions, so one entity has one IRI everywhere. All functions are
pure and return plain strings.

Each path segment is percent-encoded (RFC 3986 unreserved characters kept), so metric names such
as ``PLC_PLC_Q101.Temp_mandata`` or Nagios checks such as ``alive::ping`` give valid IRIs, and
``split_instance_iri`` turns an IRI back into its decoded segments. ``INSTANCE_KINDS`` is the one
table of the patterns the ``*_iri`` builders follow (kind -> class, segment count, integer ids);
``instance_kind`` and ``check_instance_iri`` read an IRI back through it, so the SPARQL validator
keeps no copy of its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote

from oda_analyst.errors import UsageError

ONTOLOGY_NS = "https://w3id.org/oda-analyst/ontology#"
ONTOLOGY_IRI = "https://w3id.org/oda-analyst/ontology"
INSTANCE_NS = "https://w3id.org/oda-analyst/m100/"
SHAPES_NS = "https://w3id.org/oda-analyst/shapes#"

XSD_NS = "http://www.w3.org/2001/XMLSchema#"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_NS = "http://www.w3.org/2000/01/rdf-schema#"
OWL_NS = "http://www.w3.org/2002/07/owl#"

# Prefixes every generated SPARQL query and Turtle file may declare.
PREFIXES: dict[str, str] = {
    "oda": ONTOLOGY_NS,
    "m100": INSTANCE_NS,
    "xsd": XSD_NS,
    "rdf": RDF_NS,
    "rdfs": RDFS_NS,
    "owl": OWL_NS,
}

# Stable names of the singletons of M100 (match oda_analyst.lake.topology).
DEFAULT_DATACENTER = "CINECA"
DEFAULT_ROOM = "M100-room"
DEFAULT_SYSTEM = "M100"
DEFAULT_WLM = "slurm"
DEFAULT_WEATHER = "bologna"

KeyPart = str | int
EntityKey = KeyPart | tuple[KeyPart, ...]


def oda(local_name: str) -> str:
    """IRI of an ontology term: ``oda("ComputeNode")``."""
    return ONTOLOGY_NS + local_name


def sparql_prefixes() -> str:
    """PREFIX lines for the namespaces above, one per line."""
    return "\n".join(f"PREFIX {p}: <{ns}>" for p, ns in PREFIXES.items())


def _segment(part: KeyPart) -> str:
    text = str(part)
    if text == "":
        raise UsageError("empty IRI segment", hint="entity keys and names must be non-empty")
    return quote(text, safe="-._~")


# A graph of all nodes names each node, rack and sensor in several triples, on every build:
# percent-encoding was half the cost of its static part. IRIs of the topology, metrics and
# sensors are few (bounded LRU); typed, so that True and 1 (or 1.0) keep their own entries.
@lru_cache(maxsize=1 << 17, typed=True)
def instance_iri(kind: str, *parts: KeyPart) -> str:
    """``m100:<kind>/<part>/...`` with each part percent-encoded."""
    return INSTANCE_NS + "/".join(_segment(p) for p in (kind, *parts))


def _key_parts(entity_key: EntityKey) -> tuple[KeyPart, ...]:
    return entity_key if isinstance(entity_key, tuple) else (entity_key,)


def _non_negative(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(
            f"{what} must be a non-negative integer, got {value!r}",
            hint="node, rack, job and user ids and part indexes are integers from 0",
        )
    return value


# Physical layer -------------------------------------------------------------------------------


def datacenter_iri(name: str = DEFAULT_DATACENTER) -> str:
    """``m100:datacenter/CINECA``."""
    return instance_iri("datacenter", name)


def room_iri(name: str = DEFAULT_ROOM) -> str:
    """``m100:room/M100-room``."""
    return instance_iri("room", name)


def rack_iri(rack: int) -> str:
    """``m100:rack/45``."""
    return instance_iri("rack", _non_negative(rack, "rack"))


def node_iri(node: int) -> str:
    """``m100:node/900``."""
    return instance_iri("node", _non_negative(node, "node id"))


def gpu_iri(node: int, index: int) -> str:
    """``m100:gpu/900/0``: GPU by Ganglia index 0..3 (IPMI's 0,1,3,4 map to 0,1,2,3)."""
    return instance_iri("gpu", _non_negative(node, "node id"), _non_negative(index, "GPU index"))


def cpu_iri(node: int, socket: int) -> str:
    """``m100:cpu/900/1``: CPU socket 0 or 1 (IPMI p0/p1)."""
    return instance_iri("cpu", _non_negative(node, "node id"), _non_negative(socket, "socket"))


def memory_iri(node: int, dimm: int) -> str:
    """``m100:memory/900/15``: memory module (IPMI dimm0..dimm15)."""
    return instance_iri("memory", _non_negative(node, "node id"), _non_negative(dimm, "DIMM"))


def fan_iri(node: int, fan: int) -> str:
    """``m100:fan/900/3``: node fan (IPMI fan0..fan3)."""
    return instance_iri("fan", _non_negative(node, "node id"), _non_negative(fan, "fan"))


def psu_iri(node: int, psu: int) -> str:
    """``m100:psu/900/1``: node power supply (IPMI ps0, ps1)."""
    return instance_iri("psu", _non_negative(node, "node id"), _non_negative(psu, "PSU"))


def crac_iri(device: str) -> str:
    """``m100:crac/CDZ01``: a vertiv room cooling unit."""
    return instance_iri("crac", device)


def plc_iri(panel: str) -> str:
    """``m100:plc/Q101``: a schneider liquid-cooling PLC."""
    return instance_iri("plc", panel)


def panel_iri(panel: str, device: str) -> str:
    """``m100:panel/QGBT1/main_ict``: a logics electrical panel feeder."""
    return instance_iri("panel", panel, device)


# Logical and external layers ------------------------------------------------------------------


def system_iri(name: str = DEFAULT_SYSTEM) -> str:
    """``m100:system/M100``."""
    return instance_iri("system", name)


def wlm_iri(name: str = DEFAULT_WLM) -> str:
    """``m100:wlm/slurm``."""
    return instance_iri("wlm", name)


def job_iri(job_id: int) -> str:
    """``m100:job/3423336``."""
    return instance_iri("job", _non_negative(job_id, "job id"))


def user_iri(user_id: int) -> str:
    """``m100:user/1234``."""
    return instance_iri("user", _non_negative(user_id, "user id"))


def weather_iri(location: str = DEFAULT_WEATHER) -> str:
    """``m100:weather/bologna``."""
    return instance_iri("weather", location)


def carbon_iri(zone: str) -> str:
    """``m100:carbon/IT-NORD``: grid carbon intensity of a bidding zone."""
    return instance_iri("carbon", zone)


def time_iri(start_ms: int, end_ms: int) -> str:
    """``m100:time/<start-ms>/<end-ms>``: a time interval in epoch milliseconds."""
    return instance_iri("time", start_ms, end_ms)


def metric_iri(plugin: str, metric: str) -> str:
    """``m100:metric/ipmi/total_power`` (plugin without the ``_pub`` suffix)."""
    return instance_iri("metric", plugin.removesuffix("_pub"), metric)


def sensor_iri(plugin: str, metric: str, entity_key: EntityKey) -> str:
    """``m100:sensor/ipmi/total_power/900``: one sensor per (metric, observed entity).

    ``entity_key`` is the observed entity's key in the lake's tags: a node id, a device
    (``CDZ01``), a panel (``Q101``), a ``("QGBT1", "main_ict")`` pair, ``"bologna"`` for weather,
    ``"M100"`` for cluster metrics, a job id; a tuple gives several path segments.
    """
    parts = _key_parts(entity_key)
    if not parts:
        raise UsageError("empty entity key", hint="pass a node id, device, panel or name")
    return instance_iri("sensor", plugin.removesuffix("_pub"), metric, *parts)


def entity_key_text(entity_key: EntityKey) -> str:
    """The ``oda:entityKey`` literal of a sensor: the key parts joined with ``/``."""
    return "/".join(str(p) for p in _key_parts(entity_key))


def reading_iri(sensor: str, epoch_ms: int) -> str:
    """``m100:r/<sensor-hash>/<epoch-ms>``: a reading, unique per (sensor IRI, timestamp)."""
    digest = hashlib.blake2b(sensor.encode(), digest_size=8).hexdigest()
    return instance_iri("r", digest, epoch_ms)


def split_instance_iri(iri: str) -> tuple[str, ...]:
    """Decoded path segments of an instance IRI: ``m100:gpu/900/0`` -> ``("gpu", "900", "0")``.

    Raises UsageError when the IRI is not in the instance namespace.
    """
    if not iri.startswith(INSTANCE_NS) or iri == INSTANCE_NS:
        raise UsageError(f"not an M100 instance IRI: {iri!r}", hint=f"expected {INSTANCE_NS}…")
    return tuple(unquote(s) for s in iri[len(INSTANCE_NS) :].split("/"))


# Reading IRIs back ----------------------------------------------------------------------------


@dataclass(frozen=True)
class InstanceKind:
    """The shape of one kind of instance IRI, ``m100:<kind>/<segment>/...``."""

    cls: str  # local name of the entity's ontology class
    segments: int  # path segments after the kind; negative: at least that many
    integer_ids: bool  # every segment is a non-negative integer


# First path segment -> the pattern its ``*_iri`` builder above writes.
INSTANCE_KINDS: dict[str, InstanceKind] = {
    "datacenter": InstanceKind("DataCenter", 1, False),
    "room": InstanceKind("Room", 1, False),
    "rack": InstanceKind("Rack", 1, True),
    "node": InstanceKind("ComputeNode", 1, True),
    "gpu": InstanceKind("GPU", 2, True),
    "cpu": InstanceKind("CPU", 2, True),
    "memory": InstanceKind("MemoryModule", 2, True),
    "fan": InstanceKind("Fan", 2, True),
    "psu": InstanceKind("PowerSupply", 2, True),
    "crac": InstanceKind("CRAC", 1, False),
    "plc": InstanceKind("LiquidCoolingPLC", 1, False),
    "panel": InstanceKind("ElectricalPanel", 2, False),
    "system": InstanceKind("HPCSystem", 1, False),
    "wlm": InstanceKind("WorkloadManager", 1, False),
    "job": InstanceKind("Job", 1, True),
    "user": InstanceKind("User", 1, True),
    "weather": InstanceKind("Weather", 1, False),
    "carbon": InstanceKind("CarbonIntensity", 1, False),
    "time": InstanceKind("Time", 2, True),
    "metric": InstanceKind("Metric", 2, False),
    "sensor": InstanceKind("Sensor", -3, False),  # plugin, metric, one or more key segments
    "r": InstanceKind("Reading", 2, False),
}


def check_instance_iri(iri: str) -> tuple[str, tuple[str, ...]]:
    """(class local name, decoded segments after the kind) of a well-formed instance IRI.

    ``m100:gpu/900/0`` -> ``("GPU", ("900", "0"))``. The shape is checked on the IRI as written:
    a store compares IRIs as strings, so ``node/%39`` is not the ``node/9`` that ``node_iri``
    builds. Raises UsageError saying what is wrong otherwise.
    """
    if not iri.startswith(INSTANCE_NS):
        raise UsageError(f"not an M100 instance IRI: {iri!r}", hint=f"expected {INSTANCE_NS}…")
    kind, *rest = iri[len(INSTANCE_NS) :].split("/")
    hint = f"build instance IRIs as {INSTANCE_NS}<kind>/<id>, e.g. {INSTANCE_NS}node/900"
    entry = INSTANCE_KINDS.get(kind)
    if entry is None:
        known = ", ".join(sorted(INSTANCE_KINDS))
        raise UsageError(f"'{kind}/' is not an M100 entity kind (known: {known})", hint)
    count = entry.segments
    if (count >= 0 and len(rest) != count) or (count < 0 and len(rest) < -count) or "" in rest:
        raise UsageError(
            f"malformed {entry.cls} IRI: expected {abs(count)} segment(s) after '{kind}/'", hint
        )
    if entry.integer_ids and not all(s.isdigit() for s in rest):
        raise UsageError(
            f"malformed {entry.cls} IRI: '{kind}/' takes integer ids, got {'/'.join(rest)!r}",
            hint,
        )
    return entry.cls, tuple(unquote(s) for s in rest)


def instance_kind(iri: str) -> tuple[str, tuple[str, ...]] | None:
    """(class local name, decoded segments after the kind), or None for any other IRI.

    ``m100:sensor/ipmi/total_power/900`` -> ``("Sensor", ("ipmi", "total_power", "900"))``.
    """
    try:
        return check_instance_iri(iri)
    except UsageError:
        return None
