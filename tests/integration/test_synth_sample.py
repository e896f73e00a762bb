"""A bigger slice of the `sample` profile: the Appendix-A questions are answerable."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from oda_analyst.lake.layout import partition_file
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.lake.synth.jobs import NAMED_IDS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample")
    generate(build_spec("sample", start="2022-06-01T08:00", end="2022-06-01T09:00"), out)
    return out


def test_sample_slice_answers_the_appendix_questions(lake: Path) -> None:
    amb = pl.read_parquet(lake / partition_file("22-06", "ipmi", "ambient"))
    assert amb["node"].n_unique() == 980  # Q1, Q4
    values = amb["value"].to_numpy()
    assert not np.any((values >= 31) & (values < 39))
    assert 0 < np.count_nonzero((values >= 40) & (values <= 43)) < 1000
    jobs = pl.concat(
        [pl.read_parquet(f) for f in lake.glob("year_month=*/plugin=job_table/*/*.parquet")]
    )
    last = jobs.group_by("job_id", maintain_order=True).last()
    named = last.filter(pl.col("job_id").is_in(sorted(NAMED_IDS)))  # Q7
    assert named.height == 3
    nodes = [int(n.strip("[]")) for n in named["nodes"]]
    util = pl.read_parquet(lake / partition_file("22-06", "ganglia", "Gpu0_gpu_utilization"))
    on_named = util.filter(pl.col("node").cast(pl.Utf8).is_in([str(n) for n in nodes]))
    assert on_named["value"].mean() > 40  # type: ignore[operator]
    single = last.filter(
        (pl.col("num_nodes") == 1)
        & (pl.col("start_time") < datetime(2022, 6, 2, tzinfo=UTC))
        & (pl.col("end_time") > datetime(2022, 6, 1, tzinfo=UTC))
    )
    assert single.height > 100  # Q9, Q14
    gpu = pl.read_parquet(lake / partition_file("22-06", "slurm", "s21.cluster_gpu_util"))
    assert 10 < gpu["value"].mean() < 90  # type: ignore[operator]  # Q10
