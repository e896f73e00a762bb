"""Rule-based entity extraction: the paper's 14 questions, the issue's phrasings, impossible ids."""

from __future__ import annotations

import pytest

from oda_analyst.errors import UsageError
from oda_analyst.reading.rules.entities import (
    entities_from_dict,
    extract_entities,
    with_job_keyword,
)
from oda_analyst.reading.types import Entities

# Appendix A of the paper, verbatim.
QUESTIONS = {
    "Q1": "How many nodes are there in M100?",
    "Q2": "Retrieve the total power consumption for node 900 from 1 June 2022 20:00 to 23:59 and "
    "plot the time series.",
    "Q3": "Retrieve GPU-0 utilisation for nodes 900 and 920 on 1 June 2022 from 08:00 to 15:00 and "
    "create a line plot comparing the nodes.",
    "Q4": "Retrieve the inlet temperature for all nodes on 1 June 2022 between 08:00–09:00 and "
    "create a histogram of the temperature distribution.",
    "Q5": "Retrieve ambient temperature for nodes 301 and 318 on 1 June 2022 from 08:00–15:00 and "
    "create a single comparative line plot.",
    "Q6": "Retrieve temperature and power for node 900 on 1 June 2022 (full day) and create a "
    "dual-axis plot over time.",
    "Q7": "Compute the coefficient of variation of GPU utilisation for jobs 3423336, 4835969, "
    "3776044 over their whole duration and create a comparative bar chart.",
    "Q8": "Get the total CPU and GPU hours consumed on the morning of 1 June 2022 and create a pie "
    "chart of the breakdown.",
    "Q9": "For the top-3 longest single-node jobs on 1 June 2022, retrieve their power "
    "consumption, create a comparative line plot, and report min/max/avg power.",
    "Q10": "Retrieve the average system-level CPU and GPU utilisation on 1 June 2022 between "
    "15:00–16:00 and create a side-by-side bar chart.",
    "Q11": "Retrieve the daily average temperature from the weather plugin for the first week of "
    "June 2022 and compare it with the same period of the previous month using a dual-axis plot.",
    "Q12": "Get the number of jobs executed each day over 1–10 June 2022 and plot it over the 10 "
    "days.",
    "Q13": "For node 900 on 1 June 2022, get ambient temperature, system CPU, GPU-0–4 "
    "utilisation, and total power from 12:00 to 14:00 and visualise a heatmap correlation matrix.",
    "Q14": "Fetch power consumption and users on 1 June 2022 and create a box plot of the top-10 "
    "users by number of jobs and average power consumption.",
}

# Appendix A, the entities worked out by hand; every field not named is empty/False.
EXPECTED: dict[str, dict[str, object]] = {
    "Q1": {"system": True},
    "Q2": {"nodes": (900,)},
    "Q3": {"nodes": (900, 920), "gpus": (0,)},
    "Q4": {"all_nodes": True},
    "Q5": {"nodes": (301, 318)},
    "Q6": {"nodes": (900,)},
    "Q7": {"jobs": (3423336, 3776044, 4835969)},
    "Q8": {},
    "Q9": {},  # "top-3" and "single-node" are not ids
    "Q10": {"system": True},  # system-level
    "Q11": {"weather": True},
    "Q12": {},  # "the 10 days" is not an id
    "Q13": {"nodes": (900,), "gpus": (0, 1, 2, 3)},  # "system CPU" is a metric, not the system
    "Q14": {},  # "top-10 users" names no user
}
ID_FIELDS = ("nodes", "racks", "rooms", "jobs", "users", "gpus", "cpus", "devices")
FLAG_FIELDS = ("all_nodes", "system", "weather")


def assert_entities(found: Entities, expected: dict[str, object]) -> None:
    for name in ID_FIELDS:
        assert getattr(found, name) == expected.get(name, ()), name
    for name in FLAG_FIELDS:
        assert getattr(found, name) is expected.get(name, False), name


@pytest.mark.parametrize("qid", list(EXPECTED))
def test_appendix_a_entities(qid: str) -> None:
    found = extract_entities(QUESTIONS[qid])
    assert_entities(found, EXPECTED[qid])
    if qid != "Q13":
        assert found.warnings == ()


def test_q13_gpu_range_past_three_is_cut_with_a_warning() -> None:
    found = extract_entities(QUESTIONS["Q13"])
    assert found.gpus == (0, 1, 2, 3)
    assert len(found.warnings) == 1
    assert "GPU 4 does not exist" in found.warnings[0]


def test_appendix_a_spans_are_the_entity_phrases() -> None:
    q3 = QUESTIONS["Q3"]
    found = extract_entities(q3)
    assert [q3[a:b] for a, b in found.spans] == ["GPU-0", "nodes 900 and 920"]
    q7 = QUESTIONS["Q7"]
    assert [q7[a:b] for a, b in extract_entities(q7).spans] == ["jobs 3423336, 4835969, 3776044"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node 900", {"nodes": (900,)}),
        ("nodes 900 and 920", {"nodes": (900, 920)}),
        ("nodes 900, 920 and 921", {"nodes": (900, 920, 921)}),
        ("nodes 10-19", {"nodes": tuple(range(10, 20))}),
        ("nodes 10 to 19", {"nodes": tuple(range(10, 20))}),
        ("nodes 10–12 or 40", {"nodes": (10, 11, 12, 40)}),
        ("node900", {"nodes": (900,)}),
        ("node id 7", {"nodes": (7,)}),
        ("all nodes", {"all_nodes": True}),
        ("every node", {"all_nodes": True}),
        ("the whole system", {"system": True}),
        ("Marconi100", {"system": True}),
        ("M100", {"system": True}),
        ("the cluster", {"system": True}),
        ("rack 45", {"racks": (45,)}),
        ("racks 1-3", {"racks": (1, 2, 3)}),
        ("all racks", {"racks": tuple(range(49))}),
        ("the machine room", {"rooms": ("M100-room",)}),
        ("job 3423336", {"jobs": (3423336,)}),
        ("jobs 3423336, 4835969, 3776044", {"jobs": (3423336, 3776044, 4835969)}),
        ("job id 123", {"jobs": (123,)}),
        ("job_id 123", {"jobs": (123,)}),
        ("user 1234", {"users": (1234,)}),
        ("users 12 and 13", {"users": (12, 13)}),
        ("GPU-0", {"gpus": (0,)}),
        ("GPU 0", {"gpus": (0,)}),
        ("gpu0", {"gpus": (0,)}),
        ("GPUs 0-3", {"gpus": (0, 1, 2, 3)}),
        ("Gpu3_gpu_utilization", {"gpus": (3,)}),
        ("all GPUs", {"gpus": (0, 1, 2, 3)}),
        ("CPU 1", {"cpus": (1,)}),
        ("socket 1", {"cpus": (1,)}),
        ("sockets 0 and 1", {"cpus": (0, 1)}),
        ("CDZ01", {"devices": (("crac", "CDZ01"),)}),
        ("CRAC unit 3 and CDZ-08", {"devices": (("crac", "CDZ03"), ("crac", "CDZ08"))}),
        ("PLC Q101 and Q102", {"devices": (("plc", "Q101"), ("plc", "Q102"))}),
        ("panel QGBT1/main_ict", {"devices": (("panel", "QGBT1/main_ict"),)}),
        ("QGBT2", {"devices": (("panel", "QGBT2/cdz"), ("panel", "QGBT2/pumps"))}),
        ("outdoor temperature", {"weather": True}),
        ("ambient temperature of node 3", {"nodes": (3,)}),  # IPMI inlet, not weather
        ("the system CPU time of node 3", {"nodes": (3,)}),  # a metric, not the system
    ],
)
def test_phrasings(text: str, expected: dict[str, object]) -> None:
    found = extract_entities(text)
    assert_entities(found, expected)
    assert found.warnings == ()


@pytest.mark.parametrize(
    "text",
    [
        "node 900 on 1 June 2022",
        "node 900 from 1 June 2022 20:00 to 23:59",
        "node 900 at 08:00 on 1 June 2022",
        "node 900 for the last 10 hours",
        "node 900 over 1–10 June 2022",
        "node 900 in the first week of June 2022",
        "node 900 on 1/6/2022 between 08:00–09:00",
        "node 900 on 2022-06-01 08:00:00",
        "the top-3 jobs of node 900 over the 10 days",
        "the top-10 users of node 900 and 5 racks",
        "node 900 at 100% GPU utilisation",
    ],
)
def test_numbers_in_dates_and_counts_are_not_ids(text: str) -> None:
    found = extract_entities(text)
    assert_entities(found, {"nodes": (900,)})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # blind6 S25: 'rack 12 nodes drawing …' named no rack (as if '12 nodes' were a count)
        ("rack 12 nodes drawing more than 900 W", {"racks": (12,)}),
        ("user 25000 jobs on june 2", {"users": (25000,)}),
        ("node 900 and 5 racks", {"nodes": (900,)}),  # after a separator it is still a count
        ("node 900 2 hours", {"nodes": (900,)}),  # a span of time after it is no id either
    ],
)
def test_a_number_right_after_its_keyword_is_the_id(text: str, expected: dict[str, object]) -> None:
    assert_entities(extract_entities(text), expected)


def test_date_right_after_a_list_keyword_is_not_an_id() -> None:
    found = extract_entities("jobs on 1 June 2022 and users 12 June 2022")
    assert found.jobs == () and found.users == ()


def test_lone_gpu_four_is_left_out_with_a_warning() -> None:
    found = extract_entities("GPU 4 temperature of node 1")
    assert found.gpus == ()
    assert found.nodes == (1,)
    assert "IPMI" in found.warnings[0]


def test_backwards_range_is_read_forwards_with_a_warning() -> None:
    found = extract_entities("nodes 12-10")
    assert found.nodes == (10, 11, 12)
    assert "runs backwards" in found.warnings[0]


def test_all_nodes_with_ids_warns() -> None:
    found = extract_entities("all nodes, in particular node 5")
    assert found.all_nodes and found.nodes == (5,)
    assert found.warnings


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("node 1200", "node 1200", "0..979"),
        ("nodes 970-985", "node 985", "0..979"),
        ("rack 60", "rack 60", "0..48"),
        ("GPU 7", "GPU 7", "0..3"),
        ("GPUs 5-6", "GPU 6", "0..3"),
        ("CPU 5", "socket 5", "0 and 1"),
        ("CDZ12", "CDZ12", "CDZ01..CDZ08"),
        ("Q103", "Q103", "Q101, Q102"),
        ("QGBT7", "QGBT7", "QGBT1"),
        ("QGBT3 chiller", "QGBT3/chiller", "QGBT1/chiller"),
        ("jobs 1-50000", "too large", "fewer"),
        # another machine's data is not here: never answered with M100's
        ("jobs that ran on the Leonardo system", "no 'Leonardo' system", "ask about M100"),
        ("power of nodes in the Galileo100 cluster", "'Galileo100'", "ask about M100"),
        ("What was the PUE of Fugaku on 1 June 2022?", "'Fugaku'", "ask about M100"),
    ],
)
def test_impossible_ids_raise_with_a_hint(text: str, message: str, hint: str) -> None:
    with pytest.raises(UsageError) as info:
        extract_entities(text)
    assert message in info.value.message
    assert info.value.hint is not None and hint in info.value.hint


def test_round_trip_and_model_validation() -> None:
    found = extract_entities(QUESTIONS["Q13"] + " Also rack 45, CDZ02 and QGBT1/chiller.")
    data = found.to_dict()
    assert data["nodes"] == [900] and data["devices"] == [
        ["crac", "CDZ02"],
        ["panel", "QGBT1/chiller"],
    ]
    assert entities_from_dict(data) == found
    assert entities_from_dict({}) == Entities()


@pytest.mark.parametrize(
    "bad",
    [
        {"nodes": [1200]},
        {"nodes": ["900"]},
        {"gpus": [4]},  # a model's answer gets no benefit of the doubt
        {"cpus": [-1]},
        {"devices": [["crac", "CDZ99"]]},
        {"devices": [["pdu", "X"]]},
        {"devices": ["CDZ01"]},
        {"hosts": [1]},
    ],
)
def test_from_dict_rejects_what_the_rules_reject(bad: dict[str, object]) -> None:
    with pytest.raises(UsageError) as info:
        entities_from_dict(bad)
    assert info.value.hint


@pytest.mark.parametrize(
    "text",
    [
        "jobs on the M100 cluster",
        "jobs on the Marconi 100 system",
        "power across the whole system",
        "load of the GPU cluster",
        "temperature of the machine room",
    ],
)
def test_this_machine_named_is_not_another(text: str) -> None:
    extract_entities(text)  # no error


def test_a_bare_job_id_is_a_job_but_a_level_is_not() -> None:
    # 'when did 10569684 kick off' asked which metric 'start' was: the id had no keyword
    assert extract_entities("when did 10569684 kick off and when did it wrap up?").jobs == (
        10569684,
    )
    assert with_job_keyword("what did 10569684 run on") == "what did job 10569684 run on"
    for text in ("nodes with power above 1500000 W", "facility power over 1500000 on june 1",
                 "user 28757 jobs", "nodes 12 and 13"):  # fmt: skip
        assert extract_entities(text).jobs == (), text
    assert with_job_keyword("jobs of 10569684's user") == "jobs of 10569684's user"


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("kWh drawn by node 900's four gpus 8:00-15:00 jun 1", (0, 1, 2, 3)),  # analysis1 A37
        ("power of its 4 GPUs on june 1", (0, 1, 2, 3)),
        ("jobs that asked for 4 gpus on june 1", ()),  # a count of GPUs, no GPU named
    ],
)
def test_a_nodes_four_gpus_are_all_of_them(text: str, gpus: tuple[int, ...]) -> None:
    assert extract_entities(text).gpus == gpus


@pytest.mark.parametrize(
    ("text", "nodes", "racks"),
    [
        # devset T05: '41' after 'and' was read as an hour ('not a time of day') and dropped
        ("PCIe temperature of nodes 40 and 41 on 1 June 2022 from 06:00 to 07:00", (40, 41), ()),
        ("racks 30 and 45 on june 1", (), (30, 45)),
    ],
)
def test_ids_after_and_that_are_no_hour_stay_ids(
    text: str, nodes: tuple[int, ...], racks: tuple[int, ...]
) -> None:
    found = extract_entities(text)
    assert (found.nodes, found.racks) == (nodes, racks)
