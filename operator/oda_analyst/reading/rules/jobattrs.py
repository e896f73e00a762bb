"""Attribute questions about named jobs: "when did job J end", "who ran job J", "what state did
job J finish in", "how many nodes does job J use".

The job table answers them, not a telemetry metric: a job listing gives every job's id, start,
end and node count, and ``job_fields`` adds the attributes asked for (user, state, partition,
QoS, CPUs, GPUs). Two things are read here, both from the question's words: whether every
metric-looking phrase of the question is only such attribute words (then the question is a
job-table one, never a metric one: 'end' is no metric), and which attributes it asks for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# 'how many OOM kills on 6 June', 'timeouts on june 7': Slurm end states only a job has; they
# name jobs without the word.
JOB_STATE_NOUNS = (
    r"\b(?:oom|out[\s_-]of[\s_-]memory)[\s-]+kill(?:s|ed)?\b|\btime[\s-]?outs\b|\bNODE_FAIL\b"
)

# Per-job quantities of the job table, not metrics: 'queue wait', 'run times', 'waiting time'
PER_JOB_WORDS = (
    r"queu(?:e|ing)[\s-]*(?:wait(?:ing)?s?|times?|delays?)|wait(?:ing)?[\s-]*times?"
    r"|time\s+(?:spent\s+)?in\s+(?:the\s+)?queue|run[\s-]?times?|runtimes?|wall[\s-]?times?"
)

# A job named by its id: 'job 1037364', 'job #1037364', 'jobs 12 and 13'.
_NAMED_JOB = re.compile(r"\bjobs?\s*(?:id\s*)?#?\s*\d+", re.IGNORECASE)

# Words that ask for an attribute of a job, by the field that answers them; None: the listing's
# own columns (start, end, node count) answer them.
_FIELD_OF: dict[str, str | None] = {
    "who": "user", "whose": "user", "user": "user", "users": "user", "owner": "user",
    "owns": "user", "owned": "user", "submitter": "user", "submitted": "user",
    "state": "state", "states": "state", "status": "state", "outcome": "state",
    "final": None, "result": "state",
    "partition": "partition", "queue": "partition", "qos": "qos",
    "cpus": "num_cpus", "cores": "num_cpus", "gpus": "num_gpus",
    "start": None, "started": None, "starts": None, "begin": None, "began": None,
    "end": None, "ended": None, "ends": None, "finish": None, "finished": None,
    "stop": None, "stopped": None, "when": None, "nodes": None, "node": None, "use": None,
    "uses": None, "used": None, "run": None, "ran": None, "running": None, "long": None,
    "take": None, "took": None, "takes": None, "lasted": None, "lasts": None,
    "list": None, "count": None, "time": None, "times": None,
}  # fmt: skip
ATTRIBUTE_WORDS = frozenset(_FIELD_OF)
FIELD_ORDER = ("user", "state", "partition", "qos", "num_cpus", "num_gpus")


def names_a_job(question: str) -> bool:
    return _NAMED_JOB.search(question) is not None


def only_attribute_words(phrases: Iterable[str]) -> bool:
    """Whether every phrase (the metric-looking parts of a question) is attribute words only."""
    words = [w for p in phrases for w in re.findall(r"[a-z]+", p.lower())]
    return bool(words) and all(w in ATTRIBUTE_WORDS for w in words)


def asked_fields(words: Sequence[str]) -> tuple[str, ...]:
    """The job attributes the words ask for beyond id, start, end and node count, in a fixed
    order (so the plan, and its sentence, do not depend on the wording's order)."""
    asked = {_FIELD_OF[w] for w in words if _FIELD_OF.get(w)}
    return tuple(f for f in FIELD_ORDER if f in asked)
