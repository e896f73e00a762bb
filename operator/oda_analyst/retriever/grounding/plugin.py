"""Plugin classification (P of F = M∘P∘D∘I) and the context rules of metric grounding.

``classify_plugin(phrase, entities, index)`` returns the plugin a sub-query's metric most likely
lives in, with a confidence: keyword rules over the phrase, the entities' scope (a CRAC unit →
vertiv, the system → slurm, weather → weather), and — when the embedding model is there — the
phrase's similarity to a one-line description of each plugin.

Context rules (the same word names different metrics in different places, paper §III-C):

- ``compatible_entities(entities)``: the ontology classes a metric may measure given the question's
  scope: nodes/racks/jobs/GPUs/CPUs → a node and its parts; the system → HPCSystem; weather →
  Weather; CRAC/PLC/panel devices → their classes; no scope → anything.
- ``context_phrases(phrase, entities)``: rewrites tried before the phrase itself, each a synonym
  of the catalogue: utilisation with the system as scope (``system-level``, ``cluster``, ``M100``)
  and no node or job → ``cluster … utilisation`` (slurm); a bare temperature with weather as scope →
  ``weather temperature``; bare power of a node or job, or of a rack's nodes when the question
  says 'nodes' → ``node power`` (ipmi total_power) — a rack's bare power asks which;
  bare power of the room/data centre → ``facility power`` (logics); bare humidity of the room →
  ``room humidity`` (the CRAC return air, vertiv). ``inlet``/``ambient`` and
  ``gpu power`` need no rule: they are synonyms already. A bare temperature of a node has no rule
  on purpose: ambient, PCIe, CPU-core and GPU temperatures are all "the temperature of the node",
  so grounding asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from oda_analyst.reading.types import Entities
from oda_analyst.retriever.grounding.embeddings import MetricIndex

PLUGIN_DESCRIPTIONS: dict[str, str] = {
    "ipmi": "node BMC hardware sensors: node total power, inlet ambient and PCIe temperatures, "
    "CPU core and DIMM temperatures, fan speeds, power supplies",
    "ganglia": "node operating system and GPU metrics: CPU and GPU utilisation, GPU power and "
    "temperature, memory, load average, network traffic, disk",
    "vertiv": "room air cooling units (CRAC): supply and return air temperature, humidity, fan "
    "speed, compressor",
    "schneider": "liquid cooling PLC: water supply and return temperature, flow, pumps",
    "logics": "electrical panels and facility power: active power, energy, current, voltage, PUE",
    "weather": "outdoor weather at the site: temperature, humidity, wind, pressure, clouds",
    "nagios": "monitoring service checks: node health state, alerts, availability",
    "slurm": "cluster scheduler metrics: system-level CPU and GPU utilisation, allocated and idle "
    "nodes, jobs in the queue",
}
PLUGINS: tuple[str, ...] = tuple(PLUGIN_DESCRIPTIONS)
NODE_CLASSES = frozenset({"ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply"})
_DEVICE_CLASS = {"crac": "CRAC", "plc": "LiquidCoolingPLC", "panel": "ElectricalPanel"}


def _rx(words: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + words + r")\b", re.IGNORECASE)


_KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ipmi", _rx(r"ipmi|bmc|inlet|ambient|pcie|pci|dimms?|fans?|psus?|power supply|vdd|vrm"
                 r"|node power|total power|intake|core temp\w*")),
    ("ganglia", _rx(r"ganglia|(?:gpu|cpu)\s+(?:utili[sz]ation|usage|util|load)|load average"
                    r"|memory|mem|swap|network|bytes|packets|disk|processes|boot\w*|os|nvlink"
                    r"|ecc|clock|frame buffer|fb|idle|iowait|steal|nice")),
    ("vertiv", _rx(r"vertiv|crac|cdz|cooling units?|supply air|return air|compressor"
                   r"|(?:de)?humidifier|reheat|free cooling|filter|underfloor|underflow")),
    ("schneider", _rx(r"schneider|plc|liquid cooling|chilled water|water|pumps?|flow|mandata"
                      r"|ritorno|portata")),
    ("logics", _rx(r"logics|pue|dcie|electrical|panels?|switchboard|qgbt|facility|reactive"
                   r"|active power|energy|kwh|frequency|voltage|phase|it power|chillers?")),
    ("weather", _rx(r"weather|outdoor|outside|wind|clouds?|dew|uvi?|visibility|feels like")),
    ("nagios", _rx(r"nagios|health|checks?|alive|ping|drained|alerts?|status|state")),
    ("slurm", _rx(r"slurm|scheduler|allocated|alloc|partition|queue|waiting|eligible|pending"
                  r"|cluster")),
)  # fmt: skip
_BARE_TEMPERATURE = re.compile(r"^(?:temp|temps|temperature|temperatures)$")
_BARE_POWER = re.compile(
    r"^(?:power|power (?:consumption|usage|draw|use)|wattage|consumption|energy use)$"
)
_UTILISATION = re.compile(r"\b(?:utili[sz]ation|usage|util|load)\b")


@dataclass(frozen=True)
class PluginGuess:
    """P(q) → (π, p): the plugin, its confidence and why."""

    plugin: str | None
    confidence: float
    reason: str


def compatible_entities(entities: Entities) -> frozenset[str] | None:
    """Ontology classes a metric may measure under the question's scope (None: any)."""
    classes: set[str] = set()
    if entities.nodes or entities.all_nodes or entities.racks or entities.jobs or entities.users:
        classes |= NODE_CLASSES
    if entities.gpus or entities.cpus:
        classes |= NODE_CLASSES
    if entities.system:
        classes.add("HPCSystem")
    if entities.weather:
        classes.add("Weather")
    classes.update(_DEVICE_CLASS[kind] for kind, _ in entities.devices)
    if entities.rooms:  # the room holds nodes and facility equipment alike
        return None
    return frozenset(classes) or None


def _node_scope(entities: Entities) -> bool:
    # A GPU or socket index ("GPU 2 across the whole machine") names a part of every node, not
    # the scheduler's cluster-wide figure.
    return bool(
        entities.nodes
        or entities.all_nodes
        or entities.racks
        or entities.jobs
        or entities.users
        or entities.gpus
        or entities.cpus
    )


def context_phrases(
    phrase: str, entities: Entities, *, names_nodes: bool = False
) -> list[tuple[str, str]]:
    """Rewrites of ``phrase`` implied by the scope, with the rule that made each.

    ``names_nodes``: the question says 'node(s)' outside the metric phrase ('power of the nodes
    in rack 7'). A rack's bare power is not read as its nodes' power without it: a rack draws
    through its PSUs, its nodes and its GPUs alike, and 'power of rack 7' does not say which."""
    out: list[tuple[str, str]] = []
    has_part = re.search(r"\b(?:gpu|cpu|socket|psu|fan|dimm|memory)s?\b", phrase) is not None
    if entities.system and not _node_scope(entities) and _UTILISATION.search(phrase):
        out.append((f"cluster {phrase}", "system-level utilisation is the scheduler's (slurm)"))
    if entities.weather and _BARE_TEMPERATURE.match(phrase):
        out.append(("weather temperature", "temperature of the weather is the outdoor 'temp'"))
    if _BARE_POWER.match(phrase) and not has_part:
        rack_only = bool(entities.racks) and not (
            entities.nodes or entities.all_nodes or entities.jobs or entities.users
        )
        if (
            _node_scope(entities)
            and not entities.gpus
            and not entities.cpus
            and (names_nodes or not rack_only)
        ):
            out.append(("node power", "power of a node is its total power (ipmi total_power)"))
        elif entities.rooms and not _node_scope(entities):
            out.append(("facility power", "power of the data centre is the facility's (logics)"))
    if (
        not has_part
        and bool(entities.gpus) != bool(entities.cpus)
        and (
            _BARE_POWER.match(phrase)
            or _BARE_TEMPERATURE.match(phrase)
            or _UTILISATION.fullmatch(phrase)
        )
    ):
        # 'GPU 0 at 0 % utilisation': the part the question names is the one measured
        part = "gpu" if entities.gpus else "cpu"
        out.append((f"{part} {phrase}", f"a {part.upper()} index is named: its {phrase}"))
    if entities.rooms and not entities.weather and phrase in ("humidity", "relative humidity"):
        out.append(("room humidity", "humidity of the room is the CRAC return air's (vertiv)"))
    if entities.devices and not has_part:
        kind = entities.devices[0][0]
        if all(k == kind for k, _ in entities.devices) and kind == "crac":
            out.append((f"crac {phrase}", "a CRAC unit's metric (vertiv)"))
    return out


def classify_plugin(
    phrase: str, entities: Entities, index: MetricIndex | None = None
) -> PluginGuess:
    """Rule-based P(q), with embedding similarity to the plugin descriptions as a tie-breaker."""
    votes: dict[str, float] = {}
    reasons: list[str] = []
    for plugin, pattern in _KEYWORDS:
        hits = pattern.findall(phrase)
        if hits:
            votes[plugin] = votes.get(plugin, 0.0) + len(hits)
            reasons.append(f"{plugin}: {', '.join(dict.fromkeys(h.lower() for h in hits))}")
    scope = {
        "slurm": entities.system and not _node_scope(entities),
        "weather": entities.weather,
        "vertiv": any(k == "crac" for k, _ in entities.devices),
        "schneider": any(k == "plc" for k, _ in entities.devices),
        "logics": any(k == "panel" for k, _ in entities.devices),
    }
    for plugin, in_scope in scope.items():
        if in_scope:
            votes[plugin] = votes.get(plugin, 0.0) + 1.5
            reasons.append(f"{plugin}: scope")
    if votes:
        ranked = sorted(votes.items(), key=lambda kv: -kv[1])
        top, score = ranked[0]
        runner = ranked[1][1] if len(ranked) > 1 else 0.0
        confidence = 0.9 if score > runner else 0.55
        return PluginGuess(top, confidence, "; ".join(reasons))
    if index is None:
        return PluginGuess(None, 0.0, "no keyword or scope names a plugin")
    sims = index.embed_fixed(tuple(PLUGIN_DESCRIPTIONS.values())) @ index.embed(phrase)
    probs = np.exp((sims - sims.max()) / 0.05)  # sharp softmax: cosine gaps are small
    probs /= probs.sum()
    best = int(np.argmax(probs))
    return PluginGuess(
        PLUGINS[best],
        float(probs[best]),
        f"closest plugin description (cosine {float(sims[best]):.2f})",
    )
