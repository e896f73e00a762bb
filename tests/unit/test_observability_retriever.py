"""Traces, metrics, provenance and replay of real retriever requests on a generated lake.

Real components: the synthetic generator (node 900, ipmi total_power and ambient, 31 May 23:00 to
1 June 01:00 UTC, so a window reads two monthly partitions), the real Retriever with its embedded
stores under a temporary data folder, the real embeddings, the OpenTelemetry SDK and
prometheus_client's default registry. Expected figures are read from the Parquet files with
Polars, apart from the product.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from fastmcp import Client
from fastmcp.exceptions import ToolError

from fixtures_embeddings import shared_cache_dir
from observability_helpers import attrs, memory_spans, one, parent_of, sample
from oda_analyst.cli import REPLAY_CHANGED, main
from oda_analyst.config import get_settings, load_settings
from oda_analyst.errors import UsageError
from oda_analyst.lake.synth import build_spec, generate
from oda_analyst.mcptools import USER_ENV
from oda_analyst.observability.provenance import ProvenanceRecord, add_code
from oda_analyst.observability.tracefile import read_trace
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.ontology.plan import QueryPlan
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.provenance import EXTRA_KEY, capture, stored_record
from oda_analyst.retriever.replay import _on_graph, replay
from oda_analyst.retriever.service import Retriever
from oda_analyst.vkg.request import from_plan

AS_OF = datetime(2022, 6, 15, tzinfo=UTC)
START, END = "2022-05-31T23:00", "2022-06-01T01:00"
AVG_Q = "average node power of node 900 from 31 May 2022 23:00 to 1 June 2022 01:00"
READINGS_Q = "node power of node 900 from 31 May 2022 23:00 to 1 June 2022 01:00"
MAY = "year_month=22-05/plugin=ipmi_pub/metric=total_power"
JUNE = "year_month=22-06/plugin=ipmi_pub/metric=total_power"


def _generate(root: Path, *, seed: int, start: str = START, end: str = END) -> None:
    generate(build_spec("tiny", nodes="900", metrics="total_power,ambient", seed=seed,
                        start=start, end=end), root)  # fmt: skip


@pytest.fixture(scope="module")
def metric_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None
    return cache


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    _generate(root, seed=1)
    return root


@pytest.fixture
def retriever(lake: Path, tmp_path: Path, metric_index: Path) -> Retriever:
    return Retriever(load_settings(lake=str(lake), data_dir=tmp_path / "data", redis_url=None,
                                   sparql_endpoint=None))  # fmt: skip


def _power(lake: Path, month: str) -> pl.DataFrame:
    files = str(lake / f"year_month={month}/plugin=ipmi_pub/metric=total_power/*.parquet")
    df = pl.read_parquet(files, hive_partitioning=False)
    return df.filter(pl.col("node").cast(pl.String) == "900").sort("timestamp")


def _mean_power(lake: Path) -> float:
    both = pl.concat([_power(lake, "22-05"), _power(lake, "22-06")])
    return float(both["value"].mean())  # type: ignore[arg-type]


# --- traces -----------------------------------------------------------------------------------


def test_a_request_has_one_trace_file_with_its_stages_nested(retriever: Retriever) -> None:
    got = retriever.query(AVG_Q, as_of=AS_OF)
    assert got.status == "completed", got.answer
    assert got.trace is not None
    body = read_trace(Path(got.trace))
    spans = {s["name"]: s for s in body["spans"]}
    root = spans["retriever.query"]
    assert root["parent_span_id"] is None
    assert root["attributes"]["oda.request_id"] == got.request_id
    assert root["attributes"]["oda.status"] == "completed"
    assert root["attributes"]["oda.question"] == AVG_Q
    stage1, stage2 = spans["retriever.input_validation"], spans["retriever.vkg_sparql_execution"]
    assert stage1["parent_span_id"] == root["span_id"]
    assert stage2["parent_span_id"] == root["span_id"]
    for child in ("retriever.sparql", "retriever.vkg", "retriever.execution"):
        assert spans[child]["parent_span_id"] == stage2["span_id"], child
    assert spans["retriever.sparql"]["attributes"]["oda.sparql"] == got.sparql
    validated = [e for e in spans["retriever.sparql"]["events"] if e["name"] == "sparql.validated"]
    assert validated and validated[0]["attributes"]["oda.sparql"] == got.sparql
    assert spans["retriever.vkg"]["attributes"]["oda.vkg.cached"] is False
    assert spans["retriever.execution"]["attributes"]["oda.result.rows"] == 1
    assert got.provenance is not None and got.provenance["trace_id"] == body["trace_id"]


def test_a_rejected_request_is_traced_with_its_error_code(retriever: Retriever) -> None:
    got = retriever.query("node power of node 900 on 2 June 2022 from 00:00 to 01:00",
                          as_of=datetime(2022, 6, 1, 0, 30, tzinfo=UTC))  # fmt: skip
    assert got.status == "rejected"
    root = next(s for s in read_trace(Path(str(got.trace)))["spans"] if s["parent_span_id"] is None)
    assert root["attributes"]["oda.status"] == "rejected"
    assert root["attributes"]["oda.error.code"] == (got.error or {})["code"]
    assert got.provenance is None  # no figures, nothing to replay


def test_the_same_spans_reach_the_sdk_exporters(retriever: Retriever) -> None:
    exporter = memory_spans()
    exporter.clear()
    got = retriever.query(AVG_Q, as_of=AS_OF)
    spans = exporter.get_finished_spans()
    root = one(spans, "retriever.query")
    assert f"{root.get_span_context().trace_id:032x}" == Path(str(got.trace)).stem
    vkg = one(spans, "retriever.vkg")
    parent = parent_of(vkg, spans)
    assert parent is not None and parent.name == "retriever.vkg_sparql_execution"
    assert attrs(root)["langfuse.observation.type"] == "retriever"


# --- metrics ----------------------------------------------------------------------------------


def test_metrics_count_requests_stages_validations_and_the_graph_cache(retriever: Retriever
                                                                       ) -> None:  # fmt: skip
    done = {"component": "retriever", "status": "completed"}
    stage = {"component": "retriever", "stage": "input_validation"}
    passed = {"source": "compiled", "outcome": "passed"}
    before = {
        "done": sample("oda_requests_total", done),
        "stage": sample("oda_stage_duration_seconds_count", stage),
        "passed": sample("oda_sparql_validations_total", passed),
        "hits": sample("oda_vkg_cache_hits_total"),
        "misses": sample("oda_vkg_cache_misses_total"),
        "built": sample("oda_vkg_built_bytes_total"),
    }
    first = retriever.query(AVG_Q, as_of=AS_OF)
    second = retriever.query(AVG_Q, as_of=AS_OF)
    assert first.results[0]["vkg"]["cached"] is False
    assert second.results[0]["vkg"]["cached"] is True
    assert sample("oda_requests_total", done) == before["done"] + 2
    assert sample("oda_stage_duration_seconds_count", stage) == before["stage"] + 2
    assert sample("oda_sparql_validations_total", passed) == before["passed"] + 2
    assert sample("oda_vkg_cache_misses_total") == before["misses"] + 1
    assert sample("oda_vkg_cache_hits_total") == before["hits"] + 1
    built = sample("oda_vkg_built_bytes_total") - before["built"]
    entry = retriever.stage2.cache.entry(first.results[0]["vkg"]["key"])
    assert entry is not None and built == entry.bytes > 0
    assert sample("oda_vkg_cache_bytes") >= entry.bytes
    assert sample("oda_vkg_cache_graphs") >= 1


def test_evictions_are_counted(lake: Path, tmp_path: Path, metric_index: Path) -> None:
    settings = load_settings(lake=str(lake), data_dir=tmp_path / "data1", redis_url=None,
                             sparql_endpoint=None, vkg_cache_capacity=1)  # fmt: skip
    small = Retriever(settings)
    before = sample("oda_vkg_cache_evictions_total")
    small.query(AVG_Q, as_of=AS_OF)
    small.query("node power of node 900 on 1 June 2022 from 00:00 to 00:30", as_of=AS_OF)
    # another window, another graph: the first one is evicted
    assert sample("oda_vkg_cache_evictions_total") == before + 1
    assert sample("oda_vkg_cache_graphs") == 1


# --- provenance -------------------------------------------------------------------------------


def test_an_answer_records_the_partitions_graph_and_query_it_came_from(
    retriever: Retriever, lake: Path
) -> None:
    got = retriever.query(AVG_Q, as_of=AS_OF)
    record = ProvenanceRecord.model_validate(got.provenance)
    assert record.request_id == got.request_id and record.question == AVG_Q
    (result,) = record.results
    assert result.sparql == got.sparql
    assert result.named_graph == got.results[0]["vkg"]["graph"]
    assert result.rows is not None
    assert result.rows[0][0] == pytest.approx(_mean_power(lake))
    assert [p.partition for p in result.partitions] == [MAY, JUNE]
    for part in result.partitions:
        on_disk = sorted((f.name, f.stat().st_size) for f in (lake / part.partition).iterdir())
        assert [(f.name, f.size) for f in part.files] == on_disk
        assert len(part.fingerprint) == 32
    assert record.model_calls == ()  # no model configured
    # stored with the request's checkpoint, the same record
    state = retriever.status(got.request_id)
    assert state.artifacts.extra[EXTRA_KEY] == got.provenance
    assert stored_record(state) == record


def test_the_coordinator_adds_the_code_it_ran_with_its_hash(retriever: Retriever) -> None:
    record = ProvenanceRecord.model_validate(retriever.query(AVG_Q, as_of=AS_OF).provenance)
    code = "import pandas as pd\npd.read_csv('/in/data.csv').describe().to_csv('/out/s.csv')\n"
    more = add_code(record, code, backend="gvisor", status="ok",
                    inputs={"data.csv": b"a\n1\n"}, outputs={"s.csv": b"x"})  # fmt: skip
    (run,) = more.code
    assert run.sha256 == hashlib.sha256(code.encode()).hexdigest()
    assert run.inputs == {"data.csv": hashlib.sha256(b"a\n1\n").hexdigest()}
    assert record.code == ()  # records are values: the original is unchanged
    assert ProvenanceRecord.model_validate(more.to_json()) == more


# --- replay -----------------------------------------------------------------------------------


def test_replay_of_an_unchanged_request_says_unchanged(retriever: Retriever) -> None:
    got = retriever.query(AVG_Q, as_of=AS_OF)
    report = replay(retriever, got.request_id)
    assert report.unchanged
    assert report.to_json()["status"] == "unchanged"
    assert report.partitions_changed == [] and report.figures_changed == []
    assert [r.replayed for r in report.results] == [True]
    assert report.trace is not None and Path(report.trace).is_file()


def test_replay_after_a_partition_is_rewritten_names_it_and_the_changed_figures(
    retriever: Retriever, lake: Path
) -> None:
    avg = retriever.query(AVG_Q, as_of=AS_OF)
    readings = retriever.query(READINGS_Q, as_of=AS_OF)  # beyond the row limit: a CSV result
    assert readings.rows is None and readings.csv is not None
    old_may, old_mean = _power(lake, "22-05"), _mean_power(lake)
    _generate(lake, seed=2, start=START, end="2022-06-01T00:00")  # May's hour only, other seed
    new_may = _power(lake, "22-05")
    assert not new_may["value"].equals(old_may["value"])

    report = replay(retriever, avg.request_id)
    assert not report.unchanged
    assert [(p.partition, p.change) for p in report.partitions_changed] == [(MAY, "rewritten")]
    (cell,) = report.figures_changed
    assert cell.before == pytest.approx(old_mean)
    assert cell.after == pytest.approx(_mean_power(lake))

    report = replay(retriever, readings.request_id)
    assert [(p.partition, p.change) for p in report.partitions_changed] == [(MAY, "rewritten")]
    changed = report.figures_changed
    listed = len(changed) + report.results[0].more_changes
    assert len(new_may) == len(old_may)
    # another seed moves each reading's sampling instant and its value: both cells differ
    differing = int((old_may["value"] != new_may["value"]).sum()) + int(
        (old_may["timestamp"] != new_may["timestamp"]).sum()
    )
    assert listed == differing  # every May cell that differs, and no June one
    assert {c.column for c in changed} <= {"timestamp", "value"}
    for c in changed:
        assert c.row is not None and c.row < len(old_may)  # May's rows come first (by time)
        if c.column == "value":
            assert c.before == pytest.approx(float(old_may["value"][c.row]))
            assert c.after == pytest.approx(float(new_may["value"][c.row]))


def test_replay_refuses_a_request_without_figures_and_another_users_request(
    retriever: Retriever,
) -> None:
    rejected = retriever.query("node power of node 900 on 2 June 2022 from 00:00 to 01:00",
                               as_of=datetime(2022, 6, 1, 0, 30, tzinfo=UTC))  # fmt: skip
    with pytest.raises(UsageError, match="no provenance record"):
        replay(retriever, rejected.request_id)
    done = retriever.query(AVG_Q, as_of=AS_OF, user="alice")
    with pytest.raises(UsageError, match="another user"):
        replay(retriever, done.request_id, user="bob")


def test_ask_names_its_trace_and_provenance_and_replay_exits_0_unchanged_5_changed(
    lake: Path,
    tmp_path: Path,
    metric_index: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setenv("ODA_LAKE", str(lake))
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ODA_CACHE_DIR", str(metric_index))
    # `ask` runs the coordinator over the in-process retriever MCP server, whose Retriever comes
    # from the process's settings: a fresh one for this data dir, and none left behind after
    get_settings.cache_clear()
    mcp_server.set_retriever(None)
    request.addfinalizer(lambda: (mcp_server.set_retriever(None), get_settings.cache_clear()))
    runner = CliRunner()
    asked = runner.invoke(main, ["ask", AVG_Q, "--json", "--as-of", "2022-06-15T00:00Z",
                                 "--user", "carol"])  # fmt: skip
    assert asked.exit_code == 0, asked.output
    answer = json.loads(asked.stdout)  # progress goes to stderr
    trace = Path(answer["trace"])
    assert trace.parent == tmp_path / "data" / "traces" and trace.is_file()
    # `ask` runs the coordinator: its request id, the retrieval's record behind it
    assert answer["provenance"]["request_id"] == answer["retrieval_request_id"]
    assert answer["provenance"]["results"][0]["sparql"] == answer["sparql"]
    text = runner.invoke(main, ["ask", AVG_Q, "--as-of", "2022-06-15T00:00Z", "--quiet"])
    assert text.stdout.rstrip().splitlines()[-1].startswith("trace: ")

    rid = answer["request_id"]
    same = runner.invoke(main, ["replay", rid, "--user", "carol"])
    assert same.exit_code == 0, same.output
    assert same.output.startswith("unchanged:")
    _generate(lake, seed=3, start=START, end="2022-06-01T00:00")
    changed = runner.invoke(main, ["replay", rid, "--user", "carol", "--json"])
    assert changed.exit_code == REPLAY_CHANGED, changed.output
    body = json.loads(changed.stdout)
    assert body["status"] == "changed"
    assert [p["partition"] for p in body["partitions_changed"]] == [MAY]


# --- MCP tools --------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_mcp_query_is_a_tool_span_with_the_request_beneath_it(
    retriever: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv(USER_ENV, "alice")
    mcp_server.set_retriever(retriever)
    exporter = memory_spans()
    exporter.clear()
    try:
        async with Client(mcp_server.mcp) as client:
            result = await client.call_tool("query", {"question": AVG_Q, "as_of": "2022-06-15"})
    finally:
        mcp_server.reset_retriever()
    answer = result.structured_content or {}
    assert answer["status"] == "completed"
    spans = exporter.get_finished_spans()
    tool = one(spans, "tool query")
    a = attrs(tool)
    assert json.loads(a["gen_ai.tool.call.arguments"])["question"] == AVG_Q
    assert '"status": "completed"' in a["gen_ai.tool.call.result"]
    assert a["oda.mcp.server"] == "oda-retriever"
    request = one(spans, "retriever.query")
    # the request ran in the gate's worker thread, still inside the tool's span and trace
    chain, up = [], parent_of(request, spans)
    while up is not None:
        chain.append(up.name)
        up = parent_of(up, spans)
    assert "tool query" in chain  # beneath FastMCP's own server span for the call
    assert request.get_span_context().trace_id == tool.get_span_context().trace_id
    assert Path(answer["trace"]).stem == f"{tool.get_span_context().trace_id:032x}"
    body = read_trace(Path(answer["trace"]))
    assert {"tool query", "retriever.query", "retriever.vkg"} <= {s["name"] for s in body["spans"]}
    # the caller's span too, written after the server's part: one file, one root
    roots = [s for s in body["spans"] if s["parent_span_id"] is None]
    assert [r["kind"] for r in roots] == ["client"]


def test_replay_runs_model_written_sparql_again_on_a_graph_of_the_lake_as_it_is_now(
    retriever: Retriever, lake: Path
) -> None:
    # A result as the model path records it: no plan, the graph's grounded request, and the
    # SPARQL as validated then (here a validated query, as if the model had written it).

    planned = retriever.query(AVG_Q, as_of=AS_OF)
    assert planned.sparql is not None and planned.plan is not None
    request = from_plan(QueryPlan.model_validate(planned.plan), retriever.lake)
    written = planned.sparql
    run = retriever.stage2.run_authored(request, lambda graph: _on_graph(written, graph),
                                        user="anonymous", request_id="authored-1")  # fmt: skip
    assert run.plan is None and run.request == request
    state = retriever.status(planned.request_id)
    record = capture(state, [run], [run.to_json()], lake=retriever.lake.location, tokens={},
                     model="m", trace_id=None)  # fmt: skip
    assert record.results[0].plan is None and record.results[0].request is not None
    extra = {**state.artifacts.extra, EXTRA_KEY: record.to_json()}
    artifacts = state.artifacts.model_copy(update={"extra": extra})
    retriever.checkpoints.save(state.model_copy(update={"artifacts": artifacts}))

    assert replay(retriever, planned.request_id).unchanged
    old_mean = _mean_power(lake)
    _generate(lake, seed=4, start=START, end="2022-06-01T00:00")
    again = replay(retriever, planned.request_id)
    assert not again.unchanged and [r.replayed for r in again.results] == [True]
    assert [p.partition for p in again.partitions_changed] == [MAY]
    (cell,) = again.figures_changed
    assert cell.before == pytest.approx(old_mean)
    assert cell.after == pytest.approx(_mean_power(lake))


@pytest.mark.anyio
async def test_the_replay_tool_reports_changes_to_its_owner_only(
    retriever: Retriever, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(USER_ENV, "alice")
    mcp_server.set_retriever(retriever)
    try:
        async with Client(mcp_server.mcp) as client:
            asked = await client.call_tool("query", {"question": AVG_Q, "as_of": "2022-06-15"})
            rid = (asked.structured_content or {})["request_id"]
            same = await client.call_tool("replay", {"request_id": rid})
            assert (same.structured_content or {})["status"] == "unchanged"
            _generate(lake, seed=5, start=START, end="2022-06-01T00:00")
            changed = (await client.call_tool("replay", {"request_id": rid})).structured_content
            monkeypatch.setenv(USER_ENV, "bob")
            with pytest.raises(ToolError, match="another user"):
                await client.call_tool("replay", {"request_id": rid})
    finally:
        mcp_server.reset_retriever()
    assert changed is not None and changed["status"] == "changed"
    assert [p["partition"] for p in changed["partitions_changed"]] == [MAY]
    (cell,) = changed["figures_changed"]
    assert cell["after"] == pytest.approx(_mean_power(lake))
