"""The metric catalogue: exact lake coverage, agreement with the schema, synonyms, loader errors."""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError, UsageError
from oda_analyst.lake import m100_metrics, schema
from oda_analyst.ontology.catalogue import (
    Catalogue,
    MetricInfo,
    build_catalogue,
    load_catalogue,
    main,
    normalise_phrase,
    render_catalogue,
)

ONTOLOGY = get_settings().ontology_dir
SHIPPED = ONTOLOGY / "metrics.yaml"
SOURCES = ONTOLOGY / "catalogue"

# Written out here, not imported, so a change to the code's list is caught.
ALLOWED_ENTITIES = {
    "ComputeNode", "GPU", "CPU", "MemoryModule", "Fan", "PowerSupply", "CRAC",
    "LiquidCoolingPLC", "ElectricalPanel", "Weather", "HPCSystem", "Job",
}  # fmt: skip

# Phrases deliberately shared by metrics of different kinds: none so far. Add a phrase here
# only with the reason the retriever should ask rather than pick.
INTENDED_CROSS_KIND: dict[str, set[str]] = {}

IPMI_GPU = {0: 0, 1: 1, 3: 2, 4: 3}  # IPMI slot -> Ganglia GPU index
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _read_yaml(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    return data


def _write_yaml(path: Path, data: object) -> None:
    path.write_text(yaml.dump(data, Dumper=_DUMPER, allow_unicode=True), encoding="utf-8")


@pytest.fixture(scope="module")
def cat() -> Catalogue:
    return load_catalogue(SHIPPED)


def test_shipped_file_is_what_the_sources_generate() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == render_catalogue(build_catalogue(SOURCES))


def test_covers_exactly_the_lake_metrics(cat: Catalogue) -> None:
    pairs = [(m.plugin, m.name) for m in cat]
    assert len(pairs) == len(set(pairs)) == 573
    assert set(pairs) == set(schema.all_metrics())
    assert cat.names() == {m for _, m in schema.all_metrics()}


def test_dtype_and_period_agree_with_schema(cat: Catalogue) -> None:
    for m in cat:
        assert m.dtype == m100_metrics.METRIC_DTYPES[m.plugin][m.name], m.name
        assert m.period_s == schema.sampling_period_s(m.plugin, m.name), m.name


def test_entities_are_ontology_classes(cat: Catalogue) -> None:
    assert {m.entity for m in cat} <= ALLOWED_ENTITIES
    by_plugin_entity = {(m.plugin, m.entity) for m in cat}
    assert ("vertiv", "CRAC") in by_plugin_entity
    assert {e for p, e in by_plugin_entity if p == "schneider"} == {"LiquidCoolingPLC"}
    assert {e for p, e in by_plugin_entity if p == "logics"} == {"ElectricalPanel"}
    assert cat.get("temp").entity == "Weather"
    assert cat.get("job_info_marconi100").entity == "Job"


def _expected_index(plugin: str, name: str) -> int | None:
    """entity_index read off the metric name, independently of the generator."""
    rules: list[tuple[str, str]] = [
        ("ganglia", r"Gpu(\d)_"),
        ("ipmi", r"p(\d)_"),
        ("ipmi", r"dimm(\d+)_temp$"),
        ("ipmi", r"fan(\d)_\d$"),
        ("ipmi", r"ps(\d)_"),
    ]
    for rule_plugin, pattern in rules:
        match = re.match(pattern, name)
        if plugin == rule_plugin and match:
            return int(match.group(1))
    match = re.match(r"(?:gpu|gv100card)(\d)", name)
    if plugin == "ipmi" and match:
        return IPMI_GPU[int(match.group(1))]
    return None


def test_entity_index_follows_the_name(cat: Catalogue) -> None:
    for m in cat:
        assert m.entity_index == _expected_index(m.plugin, m.name), m.name
    assert cat.get("gpu3_core_temp").entity_index == 2
    assert cat.get("gv100card4").entity_index == 3
    assert cat.get("p1_core23_temp").entity_index == 1
    assert cat.get("fan3_1").entity == "Fan"


def test_indexed_entities_only(cat: Catalogue) -> None:
    for m in cat:
        indexed = m.entity in {"GPU", "CPU", "MemoryModule", "Fan", "PowerSupply"}
        assert (m.entity_index is not None) == indexed, m.name


def _commonly_asked(m: MetricInfo) -> bool:
    name = m.name
    if m.plugin in {"ipmi", "weather", "nagios"}:
        return True
    if m.plugin == "ganglia":
        return bool(
            re.match(r"Gpu\d_(gpu_utilization|gpu_temp|memory_temp|power_usage|fb_)", name)
            or re.match(r"(cpu|load|mem)_", name)
        )
    if m.plugin == "slurm":
        return name.startswith(("s21.cluster_", "total_nodes_"))
    if m.plugin == "logics":
        return name.startswith("Tot_") or name in {"Potenza_attiva", "Energia", "Pue"}
    if m.plugin == "vertiv":
        return name.endswith(("Temperature", "Humidity"))
    if m.plugin == "schneider":
        return name.split(".")[-1] in {"Temp_mandata", "Temp_ritorno", "Portata_1", "Portata_2"}
    return False


def test_descriptions_and_synonyms(cat: Catalogue) -> None:
    common = [m for m in cat if _commonly_asked(m)]
    assert len(common) == 192  # guards the selection above against matching nothing
    for m in common:
        assert m.synonyms, f"{m.name} needs at least one synonym"
    for m in cat:
        assert len(m.description.split()) >= 5, m.name
        assert m.description.endswith("."), m.name
        assert all(s == s.lower().strip() for s in m.synonyms), m.name


def test_descriptions_are_discriminative(cat: Catalogue) -> None:
    # The retriever embeds name + description + synonyms: two metrics must never read alike.
    descriptions = [m.description for m in cat]
    assert len(set(descriptions)) == len(descriptions)


@pytest.mark.parametrize(
    ("phrase", "metric"),
    [
        ("inlet temperature", "ambient"),
        ("Inlet Temperature", "ambient"),
        ("ambient temperature", "ambient"),
        ("node inlet temp", "ambient"),
        ("node power", "total_power"),
        ("total power", "total_power"),
        ("power consumption of the node", "total_power"),
        ("node power draw", "total_power"),
        ("gpu-0 utilisation", "Gpu0_gpu_utilization"),
        ("GPU-0 utilisation", "Gpu0_gpu_utilization"),
        ("gpu 0 utilization", "Gpu0_gpu_utilization"),
        ("gpu0 usage", "Gpu0_gpu_utilization"),
        ("gpu 3 utilisation", "Gpu3_gpu_utilization"),
        ("system cpu", "cpu_system"),
        ("cluster gpu utilisation", "s21.cluster_gpu_util"),
        ("system-level gpu utilisation", "s21.cluster_gpu_util"),
        ("system-level cpu utilization", "s21.cluster_cpu_util"),
        ("outside temperature", "temp"),
        ("outdoor temperature", "temp"),
        ("supply water temperature", "PLC_PLC_Q101.Temp_mandata"),
        ("it power", "Tot_ict"),
        ("crac power", "Tot_cdz"),
        ("number of nodes", "total_nodes_config"),
        ("job table", "job_info_marconi100"),
        ("nagios state", "state"),
        ("gpu 2 core temperature", "gpu3_core_temp"),
    ],
)
def test_paper_and_operator_phrases(cat: Catalogue, phrase: str, metric: str) -> None:
    assert [m.name for m in cat.find_synonym(phrase)] == [metric]


@pytest.mark.parametrize(
    "phrase", ["gpu utilisation", "gpu utilization", "gpu temperature", "gpu power"]
)
def test_generic_gpu_phrases_are_ambiguous_between_the_four_gpus(
    cat: Catalogue, phrase: str
) -> None:
    found = cat.find_synonym(phrase)
    assert [m.entity_index for m in sorted(found, key=lambda m: m.name)] == [0, 1, 2, 3]
    assert {m.plugin for m in found} == {"ganglia"}


def test_no_synonym_spans_kinds_unless_intended(cat: Catalogue) -> None:
    owners: dict[str, set[MetricInfo]] = defaultdict(set)
    for m in cat:
        for phrase in m.synonyms:
            owners[normalise_phrase(phrase)].add(m)
    crossing = {
        phrase: {m.name for m in ms}
        for phrase, ms in owners.items()
        if len({m.kind for m in ms}) > 1
    }
    assert crossing == INTENDED_CROSS_KIND


def test_aggregatable_and_monotonic_flags(cat: Catalogue) -> None:
    for m in cat:
        if m.dtype in {"string", "none"} or m.kind in {"state", "alarm", "identifier", "setpoint"}:
            assert not m.aggregatable, m.name
        if m.monotonic:
            assert not m.aggregatable, m.name
            assert m.kind in {"energy", "counter", "duration", "network"}, m.name
    assert cat.get("Gpu1_total_energy_consumption").monotonic
    assert cat.get("Energia").monotonic
    assert cat.get("total_power").aggregatable


def test_units_of_key_metrics(cat: Catalogue) -> None:
    expected = {
        "ambient": "°C",
        "total_power": "W",
        "fan0_0": "RPM",
        "Gpu0_gpu_utilization": "%",
        "Gpu0_fb_used": "MB",
        "Gpu0_total_energy_consumption": "mJ",
        "mem_free": "kB",
        "Potenza_attiva": "kW",
        "Energia": "kWh",
        "pressure": "hPa",
        "PLC_PLC_Q101.Temp_mandata": "0.1 °C",
        "PLC_PLC_Q101.Portata_1": "0.02 m³/h",
    }
    assert {name: cat.get(name).unit for name in expected} == expected


def test_lookup_api(cat: Catalogue) -> None:
    assert len(cat) == 573
    assert "ambient" in cat
    assert cat.get("ambient").plugin == "ipmi"
    assert len(cat.by_plugin("ipmi_pub")) == 104
    assert len(cat.by_plugin("ganglia")) == 177
    assert [m.name for m in cat.by_plugin("nagios")] == ["state"]
    with pytest.raises(UsageError) as err:
        cat.by_plugin("snmp")
    assert err.value.hint and "ipmi" in err.value.hint


def test_unknown_metric_suggests_close_names(cat: Catalogue) -> None:
    with pytest.raises(UsageError) as err:
        cat.get("Gpu0_gpu_utilisation")
    assert err.value.hint and "Gpu0_gpu_utilization" in err.value.hint
    with pytest.raises(UsageError) as err:
        cat.get("TOTAL_POWER")
    assert err.value.hint and "total_power" in err.value.hint


def test_load_is_cached() -> None:
    assert load_catalogue(SHIPPED) is load_catalogue(SHIPPED)


# --- loader and builder errors -------------------------------------------------------------


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(OntologyError) as err:
        load_catalogue(tmp_path / "metrics.yaml")
    assert err.value.hint and "ODA_ONTOLOGY_DIR" in err.value.hint


def test_invalid_yaml_is_a_typed_error(tmp_path: Path) -> None:
    bad = tmp_path / "metrics.yaml"
    bad.write_text("metrics: [unclosed\n", encoding="utf-8")
    with pytest.raises(OntologyError, match="not valid YAML"):
        load_catalogue(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("version: 1\n", encoding="utf-8")
    with pytest.raises(OntologyError, match="no 'metrics' list"):
        load_catalogue(empty)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "warmth", "'kind'"),
        ("entity", "Rack", "'entity'"),
        ("synonyms", ["Inlet Temperature"], "'synonyms'"),
        ("period_s", "20", "'period_s'"),
        ("description", "", "'description'"),
    ],
)
def test_bad_entry_names_metric_and_field(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    data = _read_yaml(SHIPPED)
    entry = next(e for e in data["metrics"] if e["name"] == "ambient")
    entry[field] = value
    path = tmp_path / "metrics.yaml"
    _write_yaml(path, data)
    with pytest.raises(OntologyError) as err:
        load_catalogue(path)
    assert "'ambient'" in err.value.message and message in err.value.message
    assert err.value.hint


def test_entity_index_on_unindexed_entity_is_rejected(tmp_path: Path) -> None:
    data = _read_yaml(SHIPPED)
    next(e for e in data["metrics"] if e["name"] == "total_power")["entity_index"] = 0
    path = tmp_path / "metrics.yaml"
    _write_yaml(path, data)
    with pytest.raises(OntologyError, match="total_power"):
        load_catalogue(path)


def _copy_sources(tmp_path: Path) -> Path:
    dest = tmp_path / "catalogue"
    shutil.copytree(SOURCES, dest)
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_build_detects_a_missing_metric(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    _edit(src / "weather.yaml", "  uvi:\n", "  uvi_gone:\n")
    with pytest.raises(OntologyError, match="uvi_gone"):
        build_catalogue(src)
    _edit(src / "weather.yaml", "  uvi_gone:\n", "  uvi:\n")
    data = _read_yaml(src / "weather.yaml")
    del data["metrics"]["uvi"]
    _write_yaml(src / "weather.yaml", data)
    with pytest.raises(OntologyError, match="weather/uvi"):
        build_catalogue(src)


def test_build_detects_a_pattern_that_overshoots(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    _edit(src / "ipmi.yaml", "n: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]", "n: [16]")
    with pytest.raises(OntologyError, match="dimm16_temp"):
        build_catalogue(src)


def test_build_detects_duplicates_and_forbidden_fields(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    dup = (
        "  dimm0_temp: {unit: C, kind: temperature, entity: MemoryModule, entity_index: 0,\n"
        "               description: A second entry for a generated metric., synonyms: []}\n"
    )
    _edit(src / "ipmi.yaml", "metrics:\n", "metrics:\n" + dup)
    with pytest.raises(OntologyError, match="defined twice"):
        build_catalogue(src)
    src = _copy_sources(tmp_path / "b")
    _edit(src / "weather.yaml", "  uvi:\n", "  uvi:\n    dtype: float64\n")
    with pytest.raises(OntologyError, match="sets dtype"):
        build_catalogue(src)


def test_build_reports_bad_placeholders(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    _edit(src / "ipmi.yaml", '"dimm{n}_temp"', '"dimm{m}_temp"')
    with pytest.raises(OntologyError, match="placeholder"):
        build_catalogue(src)


def test_main_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "--output", str(SHIPPED)]) == 0
    out = tmp_path / "metrics.yaml"
    out.write_text("stale\n", encoding="utf-8")
    assert main(["--check", "--output", str(out)]) == 1
    assert main(["--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")
    assert "573 metrics" in capsys.readouterr().out
