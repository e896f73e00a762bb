"""The metric catalogue: one typed entry per lake metric (573), read from ``ontology/metrics.yaml``.

``metrics.yaml`` is generated: ``build_catalogue()`` expands the pattern families and merges the
hand-written entries of ``ontology/catalogue/<plugin>.yaml``, taking each metric's dtype and
sampling period from ``oda_analyst.lake.schema`` so that they cannot drift. Regenerate with
``python -m oda_analyst.ontology.catalogue`` (``--check`` only compares).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError, UsageError
from oda_analyst.lake.m100_metrics import METRIC_DTYPES
from oda_analyst.lake.schema import PLUGINS, sampling_period_s

# Ontology class local names a metric can measure (must match ontology/oda.ttl).
Entity = Literal[
    "ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply", "CRAC",
    "LiquidCoolingPLC", "ElectricalPanel", "Weather", "HPCSystem", "Job",
]  # fmt: skip
# What physical quantity (or kind of value) a metric is.
Kind = Literal[
    "temperature", "power", "energy", "voltage", "current", "frequency", "speed", "utilisation",
    "memory", "storage", "network", "load", "count", "counter", "duration", "state", "alarm",
    "flow", "humidity", "pressure", "position", "setpoint", "control", "ratio", "direction",
    "distance", "index", "identifier", "text", "time", "table",
]  # fmt: skip
Dtype = Literal["int32", "float32", "float64", "string", "none"]
ENTITY_CLASSES: tuple[str, ...] = get_args(Entity)
KINDS: tuple[str, ...] = get_args(Kind)
DTYPES: tuple[str, ...] = get_args(Dtype)
# Entities that are one of several inside a node: only these carry an entity_index.
INDEXED_ENTITIES = frozenset({"GPU", "CPU", "MemoryModule", "Fan", "PowerSupply"})

FIELD_ORDER = (
    "name", "plugin", "unit", "period_s", "dtype", "entity", "entity_index", "kind",
    "aggregatable", "monotonic", "description", "synonyms",
)  # fmt: skip
_REGEN_HINT = "regenerate it with `python -m oda_analyst.ontology.catalogue`"
# libyaml is ~10x faster than the pure-Python parser on the 7,000-line catalogue.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def normalise_phrase(text: str) -> str:
    """Lower-case, hyphens/underscores as spaces, one space: 'GPU-0 Load' -> 'gpu 0 load'."""
    return " ".join(re.sub(r"[-_]", " ", text.lower()).split())


@dataclass(frozen=True)
class MetricInfo:
    """What one lake metric measures, in which unit, on which ontology entity."""

    name: str
    plugin: str
    unit: str
    period_s: int | None
    dtype: str
    entity: str
    entity_index: int | None
    kind: str
    aggregatable: bool
    monotonic: bool
    description: str
    synonyms: tuple[str, ...]

    def said(self) -> tuple[str, ...]:
        """The name and each synonym as words: lower case, '_' as a space, one space."""
        return tuple(" ".join(n.lower().replace("_", " ").split())
                     for n in (self.name, *self.synonyms))  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """Plain mapping in the catalogue's field order (synonyms as a list)."""
        out = {f: getattr(self, f) for f in FIELD_ORDER}
        out["synonyms"] = list(self.synonyms)
        return out


class _Entry(BaseModel):
    """Validation model of one catalogue entry; a bad field is reported with its metric."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1)
    plugin: str
    unit: str
    period_s: int | None = Field(ge=1)
    dtype: Dtype
    entity: Entity
    entity_index: int | None = Field(ge=0)
    kind: Kind
    aggregatable: bool
    monotonic: bool
    description: str = Field(min_length=10)
    synonyms: list[str]

    @field_validator("plugin")
    @classmethod
    def _known_plugin(cls, value: str) -> str:
        if value not in PLUGINS:
            raise ValueError(f"unknown plugin {value!r}; expected one of {', '.join(PLUGINS)}")
        return value

    @field_validator("synonyms")
    @classmethod
    def _clean_synonyms(cls, value: list[str]) -> list[str]:
        for phrase in value:
            if not phrase.strip() or phrase != phrase.strip() or phrase != phrase.lower():
                raise ValueError(f"synonym {phrase!r} must be non-empty, trimmed and lower-case")
        if len({normalise_phrase(p) for p in value}) != len(value):
            raise ValueError("synonyms repeat (after normalisation)")
        return value

    def info(self) -> MetricInfo:
        if self.entity_index is not None and self.entity not in INDEXED_ENTITIES:
            raise OntologyError(
                f"metric {self.name!r}: entity_index set on non-indexed entity {self.entity}",
                hint=f"only {', '.join(sorted(INDEXED_ENTITIES))} carry an index",
            )
        data = self.model_dump()
        data["synonyms"] = tuple(data["synonyms"])
        return MetricInfo(**data)


def _entry(raw: Mapping[str, Any], where: str) -> MetricInfo:
    try:
        return _Entry.model_validate(dict(raw)).info()
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(entry)"
        raise OntologyError(
            f"{where}: metric {raw.get('name', '?')!r}, field {field!r}: {err['msg']}",
            hint="fix the entry; units, kinds and entities are listed in the metrics.yaml header",
        ) from None


_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z])([A-Z])")


class Catalogue:
    """The loaded catalogue: look metrics up by name, plugin or synonym."""

    def __init__(self, entries: Sequence[MetricInfo]) -> None:
        self._entries = tuple(entries)
        self._by_name: dict[str, MetricInfo] = {}
        self._by_synonym: dict[str, list[MetricInfo]] = {}
        for info in self._entries:
            if info.name in self._by_name:
                raise OntologyError(f"metric {info.name!r} appears twice", hint=_REGEN_HINT)
            self._by_name[info.name] = info
            for phrase in info.synonyms:
                self._by_synonym.setdefault(normalise_phrase(phrase), []).append(info)

    def __iter__(self) -> Iterator[MetricInfo]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> frozenset[str]:
        return frozenset(self._by_name)

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """Every word of the metric names, descriptions and synonyms, lower case
        (``Gpu0_gpu_utilization`` gives gpu0, gpu, utilization)."""
        words: set[str] = set()
        for info in self._entries:
            for text in (info.name, info.description, *info.synonyms):
                words.update(_WORD.findall(_CAMEL.sub(r"\1 \2", text).lower()))
        return frozenset(words)

    def get(self, name: str) -> MetricInfo:
        """The entry of a metric; a UsageError with close names when it is unknown."""
        try:
            return self._by_name[name]
        except KeyError:
            pass
        lowered = {n.lower(): n for n in self._by_name}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=5, cutoff=0.6)
        hint = (
            f"did you mean: {', '.join(lowered[c] for c in close)}?"
            if close
            else "metric names are case-sensitive; `find_synonym` maps phrases to metrics"
        )
        raise UsageError(f"unknown metric {name!r}", hint=hint)

    def by_plugin(self, plugin: str) -> list[MetricInfo]:
        """Entries of one plugin (``ipmi`` or ``ipmi_pub``), sorted by name."""
        wanted = plugin.strip().removesuffix("_pub")
        if wanted not in PLUGINS:
            raise UsageError(
                f"unknown plugin {plugin!r}", hint=f"choose among: {', '.join(PLUGINS)}"
            )
        return [m for m in self._entries if m.plugin == wanted]

    def find_synonym(self, phrase: str) -> list[MetricInfo]:
        """Metrics having ``phrase`` as a synonym (exact match after normalise_phrase)."""
        return list(self._by_synonym.get(normalise_phrase(phrase), []))


# --- loading metrics.yaml ---------------------------------------------------------------


def default_path() -> Path:
    return get_settings().ontology_dir / "metrics.yaml"


def load_catalogue(path: Path | None = None) -> Catalogue:
    """Read and validate ``metrics.yaml`` (default: the configured ontology folder); cached."""
    return _load_cached((path or default_path()).resolve())


@lru_cache(maxsize=8)
def _load_cached(path: Path) -> Catalogue:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OntologyError(
            f"cannot read the metric catalogue {path}: {exc.strerror or exc}",
            hint=f"set ODA_ONTOLOGY_DIR to the folder holding metrics.yaml, or {_REGEN_HINT}",
        ) from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise OntologyError(f"{path} is not valid YAML: {exc}", hint=_REGEN_HINT) from None
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), list):
        raise OntologyError(f"{path} has no 'metrics' list", hint=_REGEN_HINT)
    entries = []
    for i, raw in enumerate(data["metrics"]):
        if not isinstance(raw, dict):
            raise OntologyError(f"{path}: entry {i} is not a mapping", hint=_REGEN_HINT)
        entries.append(_entry(raw, str(path)))
    return Catalogue(entries)


# --- building from patterns and hand-written entries --------------------------------------

# Fields a source file may set; name, plugin, dtype and period_s come from the family or schema.
_SOURCE_FIELDS = frozenset(FIELD_ORDER) - {"name", "plugin", "dtype", "period_s"}


class _Family(BaseModel):
    """A pattern: every member template expanded over every value binding."""

    model_config = ConfigDict(extra="allow")

    id: str
    product: dict[str, list[int | str]] | None = None
    values: list[dict[str, int | str]] | None = None
    members: list[dict[str, Any]] = Field(min_length=1)

    def bindings(self) -> list[dict[str, int | str]]:
        if self.values is not None:
            return self.values
        if self.product is None:
            return [{}]
        keys = list(self.product)
        return [
            dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*self.product.values())
        ]


class _SourceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plugin: str
    defaults: dict[str, Any] = Field(default_factory=dict)
    families: list[_Family] = Field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = Field(default_factory=dict)


def _fill(value: Any, binding: Mapping[str, int | str]) -> Any:
    if isinstance(value, str):
        return value.format_map(binding)
    if isinstance(value, list):
        return [_fill(v, binding) for v in value]
    return value


def _complete(name: str, plugin: str, fields: Mapping[str, Any], where: str) -> MetricInfo:
    stray = set(fields) - _SOURCE_FIELDS
    if stray:
        raise OntologyError(
            f"{where}: metric {name!r} sets {', '.join(sorted(stray))}",
            hint="name, plugin, dtype and period_s come from the pattern and lake/schema.py",
        )
    if name not in METRIC_DTYPES.get(plugin, {}):
        raise OntologyError(
            f"{where}: {name!r} is not a {plugin} metric of the lake",
            hint="the catalogue covers exactly lake/m100_metrics.py; fix the name or the pattern",
        )
    raw = {
        "name": name,
        "plugin": plugin,
        "dtype": METRIC_DTYPES[plugin][name],
        "period_s": sampling_period_s(plugin, name),
        **fields,
    }
    if isinstance(raw.get("entity_index"), str):
        try:
            raw["entity_index"] = int(raw["entity_index"])
        except ValueError:
            raise OntologyError(
                f"{where}: metric {name!r}: entity_index {raw['entity_index']!r} is not an int",
                hint="entity_index templates must format to an integer",
            ) from None
    return _entry(raw, where)


def _expand(src: _SourceFile, where: str) -> Iterator[MetricInfo]:
    for fam in src.families:
        extra = fam.model_extra or {}
        for binding in fam.bindings():
            for member in fam.members:
                fields = {**src.defaults, **extra, **member}
                name_tpl = fields.pop("name", None)
                if not isinstance(name_tpl, str):
                    raise OntologyError(f"{where}: family {fam.id!r} member without a name")
                try:
                    filled = {k: _fill(v, binding) for k, v in fields.items()}
                    name = name_tpl.format_map(binding)
                except (KeyError, ValueError, IndexError) as exc:
                    raise OntologyError(
                        f"{where}: family {fam.id!r}: bad template placeholder {exc}",
                        hint="placeholders must name keys of the family's product/values",
                    ) from None
                yield _complete(name, src.plugin, filled, f"{where} family {fam.id}")
    for name, fields in src.metrics.items():
        yield _complete(name, src.plugin, {**src.defaults, **fields}, where)


def _read_source(path: Path) -> _SourceFile:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
        return _SourceFile.model_validate(data)
    except yaml.YAMLError as exc:
        raise OntologyError(f"{path} is not valid YAML: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise OntologyError(
            f"{path}: {loc}: {err['msg']}", hint="see ontology/catalogue/README.md"
        ) from None


def source_dir() -> Path:
    return get_settings().ontology_dir / "catalogue"


def build_catalogue(sources: Path | None = None) -> list[MetricInfo]:
    """Expand patterns + hand-written entries of ``sources/*.yaml``; check exact lake coverage."""
    folder = sources or source_dir()
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise OntologyError(
            f"no catalogue sources in {folder}", hint="expected <plugin>.yaml files"
        )
    seen: dict[str, MetricInfo] = {}
    for path in files:
        src = _read_source(path)
        for info in _expand(src, path.name):
            if info.name in seen:
                raise OntologyError(
                    f"{path.name}: metric {info.name!r} defined twice",
                    hint="a metric is either generated by a family or written by hand, not both",
                )
            seen[info.name] = info
    missing = [f"{p}/{m}" for p, m in _all_pairs() if m not in seen]
    if missing:
        raise OntologyError(
            f"{len(missing)} lake metrics have no catalogue entry: {', '.join(missing[:10])}",
            hint=f"add them to {folder}/<plugin>.yaml",
        )
    order = {p: i for i, p in enumerate(PLUGINS)}
    return sorted(seen.values(), key=lambda m: (order[m.plugin], m.name))


def _all_pairs() -> list[tuple[str, str]]:
    return [(p, m) for p, metrics in METRIC_DTYPES.items() for m in metrics]


# --- rendering metrics.yaml ---------------------------------------------------------------


class _FlowList(list[str]):
    """A list dumped inline, so synonyms stay on one line."""


class _Dumper(_BaseDumper):  # type: ignore[misc]
    pass


def _flow_list(dumper: yaml.BaseDumper, data: _FlowList) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(_FlowList, _flow_list)

HEADER = """\
# GENERATED FILE - do not edit. Sources: ontology/catalogue/<plugin>.yaml (patterns + hand-written
# entries), dtype and period_s from operator/oda_analyst/lake/schema.py. Regenerate with
#   python -m oda_analyst.ontology.catalogue
#
# One entry per lake metric. Fields:
#   name, plugin (lake folder without _pub), unit, period_s (nominal sampling period, s; null =
#   per job state poll), dtype (value column), entity (ontology class measured), entity_index
#   (GPU 0-3 in Ganglia numbering, CPU socket, DIMM, fan module, power supply; else null), kind,
#   aggregatable (false where averaging is wrong: strings, states, ids, set points, counters),
#   monotonic (cumulative counter/energy), description, synonyms (lower-case operator phrases).
# Units are human short forms: °C, W, kW, kWh, MW, MWh, Mvar, Mvarh, A, V, Hz, RPM, %, MHz, MB,
#   kB, GB, mJ, µs, s, min, h, B/s, packets/s, hPa, Pa, m, m/s, deg, m³/h; "1" = dimensionless
#   number, "count" = number of things, "state" = enumerated code or flag, "" = text.
#   A leading factor means the raw value counts that quantum: "0.1 °C" -> 235 is 23.5 °C.
"""


def render_catalogue(entries: Sequence[MetricInfo]) -> str:
    """The text of metrics.yaml for these entries (deterministic)."""
    rows = []
    for info in entries:
        row = info.as_dict()
        row["synonyms"] = _FlowList(info.synonyms)
        rows.append(row)
    body = yaml.dump(
        {"version": 1, "metrics": rows},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=1_000_000,  # one line per description and synonym list: greppable, clean diffs
        default_flow_style=False,
    )
    return HEADER + body


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate metrics.yaml (or, with --check, exit 1 when it is stale)."""
    parser = argparse.ArgumentParser(prog="python -m oda_analyst.ontology.catalogue")
    parser.add_argument(
        "--output", type=Path, default=None, help="default: <ontology>/metrics.yaml"
    )
    parser.add_argument("--sources", type=Path, default=None, help="default: <ontology>/catalogue")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    args = parser.parse_args(argv)
    out: Path = args.output or default_path()
    try:
        text = render_catalogue(build_catalogue(args.sources))
    except OntologyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            print(f"{out} is stale: {_REGEN_HINT}", file=sys.stderr)
            return 1
        print(f"{out} is up to date")
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({text.count(chr(10) + '- name:')} metrics)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
