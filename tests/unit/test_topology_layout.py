from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.lake import layout, schema, topology


def test_parse_int_list_with_ranges() -> None:
    assert topology.parse_int_list("0-3,900, 920,2") == [0, 1, 2, 3, 900, 920]


@pytest.mark.parametrize("text", ["a", "5-2", "1-x", "0-1000"])
def test_parse_int_list_rejects(text: str) -> None:
    with pytest.raises(UsageError) as info:
        topology.parse_int_list(text, hi=979, what="node")
    assert info.value.hint


def test_room_layout_holds_every_rack_once() -> None:
    racks = [r for row in topology.ROOM_ROWS for r in row if r >= 0]
    assert sorted(racks) == list(range(topology.N_RACKS))
    assert topology.rack_of(979) == 48
    assert topology.nodes_of_rack(45)[0] == 900
    assert topology.rack_position(0) == (2, 17)


def test_months_and_paths() -> None:
    start = datetime(2022, 5, 31, 23, tzinfo=UTC)
    end = datetime(2022, 7, 1, tzinfo=UTC)
    assert layout.months_between(start, end) == ["22-05", "22-06"]
    assert layout.partition_file("22-06", "ipmi", "total_power") == (
        "year_month=22-06/plugin=ipmi_pub/metric=total_power/a_0.parquet"
    )
    assert layout.partition_dir("22-06", "job_table", "job_info_marconi100") == (
        "year_month=22-06/plugin=job_table/metric=job_info_marconi100"
    )
    assert layout.month_bounds("22-12")[1] == datetime(2023, 1, 1, tzinfo=UTC)


def test_schema_facts() -> None:
    assert len(schema.all_metrics()) == 573
    assert {p: len(m) for p, m in schema.METRIC_DTYPES.items()} == {
        "ipmi": 104,
        "ganglia": 177,
        "vertiv": 25,
        "schneider": 164,
        "weather": 10,
        "logics": 37,
        "nagios": 1,
        "slurm": 54,
        "job_table": 1,
    }
    assert str(schema.metric_schema("ipmi", "ambient").field("value").type) == "float"
    assert str(schema.metric_schema("ganglia", "os_name").field("value").type).startswith(
        "dictionary<values=string, indices=int16"
    )
    assert len(schema.job_table_schema()) == 89
    assert schema.sampling_period_s("ipmi", "total_power") == 20
    assert schema.sampling_period_s("weather", "temp") == 600
    assert schema.sampling_period_s("job_table", "job_info_marconi100") is None
    assert schema.check_plugin("ipmi_pub") == "ipmi"
    with pytest.raises(UsageError):
        schema.check_plugin("ipmy")
