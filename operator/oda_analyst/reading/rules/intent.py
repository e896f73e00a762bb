"""Intent classification (I of F = M∘P∘D∘I) by rules: metric or not, single or multi.

A question is about metrics unless a non-metric pattern says otherwise. Non-metric questions
leave the metric pipeline early with a ``sub_kind`` the planner routes on:

- ``count_entities``: "How many nodes are there in M100?" (the base graph answers it);
- ``list_entities``: "list the users", "which racks are in row 2";
- ``list_jobs``: "which jobs ran on node 900";
- ``job_stats``: CPU/GPU/node hours, "number of jobs executed each day", longest jobs, top users
  by jobs — everything the job table answers without a telemetry metric.

Job-table patterns win over metric phrases only where they are unambiguous (``cpu hours``,
``number of jobs executed``); otherwise a question with a metric phrase is a metric question, so
"How many nodes have an inlet temperature above 30 °C?" stays metric. The cardinality is the
number of metric phrases the decomposition rules find (``decompose.chunk``), over entity-masked
text: "nodes 900 and 920" is one entity list, not two metrics.
"""

from __future__ import annotations

import re

from oda_analyst.reading.rules import jobattrs
from oda_analyst.reading.types import (
    Cardinality,
    Chunking,
    Intent,
    NonMetricKind,
)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# Unambiguous job-table questions: win even when a metric-looking word is present.
_STRONG: tuple[tuple[re.Pattern[str], NonMetricKind, str], ...] = (
    (_rx(r"\b(?:cpu|gpu|node|core)s?(?:\s*(?:and|,|&|or)\s*(?:cpu|gpu|node|core)s?)*[\s-]*hours?\b"),
     "job_stats", "CPU/GPU/node hours come from the job table"),
    (_rx(r"\bnumber\s+of\s+jobs?\b(?=.*\b(?:executed|ran|run|submitted|completed|finished"
         r"|started|failed|per|each|by|of\s+user)\b)"), "job_stats",
     "a job count comes from the job table"),
    (_rx(r"\bhow\s+many\s+(?:\w+\s+){0,2}(?:jobs?|users?)\b"), "job_stats",
     "counting jobs or users is a job-table question"),
    (_rx(r"^\W*(?:the\s+)?jobs?\s+(?:that\s+)?(?:started|submitted|ended|finished|completed"
         r"|failed|began)\s+(?:per|each|every|by)\b"), "job_stats",
     "'jobs started per hour' counts jobs"),
    (_rx(jobattrs.JOB_STATE_NOUNS), "job_stats", "OOM kills, timeouts: jobs' end states"),
    (_rx(r"\bjobs?\b.*\b(?:per|each|by|every|across)\s+(?:slurm\s+|final\s+|end\s+|exit\s+)?"
         r"(?:partitions?|qos|states?|status(?:es)?|outcomes?)\b"
         r"|\bhow\s+(?:\w+\s+){0,3}jobs?\b.*\b(?:finish(?:ed)?|end(?:ed)?|fared?|turned\s+out)\b"),
     "job_stats", "jobs per partition, final state or QoS come from the job table"),
    (_rx(rf"\b(?:{jobattrs.PER_JOB_WORDS})\b(?=.*\bjobs?\b)|\bjobs?\b.*\b(?:{jobattrs.PER_JOB_WORDS})\b"),
     "job_stats", "queue waits and run times are the job table's"),
    (_rx(r"\bjobs?\s+(?:that\s+were\s+|were\s+)?submitted\b(?!\s+by)|\bsubmissions\b"),
     "job_stats", "jobs by submission time come from the job table"),
    (_rx(r"\b(?:longest|shortest|largest|biggest)\s+(?:[\w-]+\s+){0,2}jobs?\b(?!.*\b(?:power|temp"
         r"|utili[sz]ation|usage|energy|load|memory)\w*)"), "job_stats", "job durations/sizes"),
)  # fmt: skip
# Only when no metric phrase is found.
_WEAK: tuple[tuple[re.Pattern[str], NonMetricKind, str], ...] = (
    (_rx(r"\bhow\s+many\s+(?:\w+\s+){0,2}(?:nodes?|racks?|gpus?|cpus?|sockets?|cores?|rooms?"
         r"|crac|units?|panels?)\b"), "count_entities", "counting entities of the topology"),
    (_rx(r"\b(?:which|what|list|show|find)\b.*\bjobs?\b"), "list_jobs", "a list of jobs"),
    (_rx(r"\bjobs?\b.*\b(?:ran|run|running|executed|submitted|on\s+node)\b"), "list_jobs",
     "a list of jobs"),
    (_rx(r"\b(?:which|what|list|show)\b.*\b(?:users?|nodes?|racks?|gpus?|devices?|panels?)\b"),
     "list_entities", "a list of entities"),
    (_rx(r"^\W*(?:the\s+)?racks?\s+(?:of|for)\s+(?:nodes?|hosts?)\b"), "list_entities",
     "'rack of node N' asks which rack"),
    (_rx(r"\b(?:users?|jobs?)\b"), "job_stats", "a job-table question"),
)  # fmt: skip


def classify_intent(question: str, chunking: Chunking) -> Intent:
    """Rule-based I(q): metric or not, and how many metric phrases."""
    phrases = [ph.text for ph in chunking.phrases]
    hours = _STRONG[0][0].search(question)  # 'GPU hours of job J' is a job statistic
    if (
        jobattrs.names_a_job(question)
        and not hours
        and (not phrases or jobattrs.only_attribute_words(phrases))
    ):
        # 'when did job 1037364 end', 'how many nodes does job J use': 'end' or 'nodes' look
        # like a metric phrase or an entity count, and are attributes of the named job
        return Intent("non_metric", "single", 0.9, "list_jobs", "an attribute of a named job")
    for pattern, sub_kind, reason in _STRONG:
        if pattern.search(question):
            return Intent("non_metric", "single", 0.9, sub_kind, reason)
    n = len(chunking.phrases)
    if n:
        cardinality: Cardinality = "multi" if n > 1 else "single"
        return Intent("metric", cardinality, 0.9, None, f"{n} metric phrase(s)")
    for pattern, sub_kind, reason in _WEAK:
        if pattern.search(question):
            return Intent("non_metric", "single", 0.8, sub_kind, reason)
    # Nothing metric-like and no job/entity pattern: metric intent with no phrase; grounding
    # then fails with 'no metric named', which is the useful answer.
    return Intent("metric", "single", 0.5, None, "no metric phrase and no job/entity pattern")
