"""The question's form, read from its words outside entity and time spans.

"which nodes …" asks for nodes, "what rack is node N in" for a rack, "who …" for users, "how
many users" for a count of users, "jobs that started on 4 June" the jobs of that event. The
reader reads these cues into ``FormCues``; the planner shapes its plans to them
(``retriever.planning.shape``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from oda_analyst.reading.rules import jobattrs
from oda_analyst.reading.types import FormCues

_WORD = re.compile(r"[a-z][a-z'_-]*")
_LISTERS = frozenset({"which", "what", "list", "name", "show", "only"})  # only: understood_as
_NODE = frozenset({"node", "nodes", "host", "hosts", "server", "servers"})
_LINKS = frozenset({"with", "that", "whose", "where", "which"})
_ASKS_IF = frozenset({"did", "does", "do", "was", "were", "is", "are", "has", "have", "had"})
_WHO = frozenset({"who", "whom"})  # "whose" is relative: "nodes whose inlet …"
_USERS = frozenset({"user", "users"})
_RACK = frozenset({"rack", "racks"})
_HOW_MANY_OF = {"users": "user", "user": "user", "racks": "rack", "rack": "rack",
                "nodes": "node", "node": "node", "jobs": "job", "job": "job"}  # fmt: skip
# 'jobs that started on 4 June' are not the jobs running that day. An end verb followed by a
# state ('ended in FAILED', 'finished as CANCELLED') names the final state; the window then
# selects when it was reached (below), as for 'jobs that failed on 4 June'.
_STARTED = frozenset({"started", "start", "starting", "began", "begun", "launched"})
_ENDED = frozenset({"ended", "end", "ending", "finished", "finish", "terminated", "stopped",
                    "wrapped"})  # fmt: skip
_STATE_WORDS = frozenset({"failed", "fail", "failing", "failure", "failures", "completed",
                          "cancelled", "canceled", "timeout", "timed", "oom", "memory", "node_fail",
                          "preempted", "killed", "state", "states", "status"})  # fmt: skip
# 'FAILED jobs running on 4 June', 'of the jobs that ran on 4 June, how many timed out': the
# window selects the jobs running in it, whatever their final state.
_RUNNING = frozenset({"running", "ran", "run", "active", "executing", "alive"})
_COUNTED = frozenset({"distinct", "different", "diff", "unique", "separate", "individual"})
_READINGS = frozenset({"reading", "readings", "sample", "samples", "measurement", "measurements",
                       "values", "times", "datapoints", "points"})  # fmt: skip


def read_form(words: Sequence[str]) -> FormCues:
    """FormCues cues from the question's words outside entity and time spans, in order."""
    w = [t for t in words if t not in ("the", "a", "an", "all", "of", "me")]
    lists_nodes = asks_rack = asks_users = asks_state = hours = False
    counts = None
    for i, tok in enumerate(w):
        nxt = w[i + 1 : i + 3]
        if tok in _LISTERS and any(t in _NODE for t in nxt):
            lists_nodes = True
        if tok == "any" and nxt[:1] and nxt[0] in _NODE and (w[0] in _ASKS_IF or i == 0):
            # 'did any node hit 180 W', 'any node in rack 5 where …': the nodes that did (none:
            # no); not 'the highest temperature any node reported', a statistic over them
            lists_nodes = True
        if tok in _LISTERS and any(t in _RACK for t in nxt):
            asks_rack = True
        if tok in _WHO or (tok in _LISTERS and any(t in _USERS for t in nxt[:1])):
            asks_users = True
        if tok in _LISTERS and any(t in ("state", "status", "states") for t in nxt[:1]):
            asks_state = True
        if tok == "how" and nxt[:1] == ["many"]:
            after = [t for t in w[i + 2 : i + 4] if t not in _COUNTED]
            counts = _HOW_MANY_OF.get(after[0]) if after else None
            hours = hours or after[:1] == ["hours"]
        if tok == "number" and nxt[:1] == ["hours"]:
            hours = True
        if tok == "number" and len(w) > i + 2 and w[i + 1] in _COUNTED:
            counts = _HOW_MANY_OF.get(w[i + 2])  # '[the] number of distinct users' ('of' is cut)
        elif tok == "number" and counts is None and len(w) > i + 1:
            counts = _HOW_MANY_OF.get(w[i + 1])  # 'number of nodes allocated to job J'
        if tok == "count" and counts is None:
            # 'node count of job J', 'count of users': what is counted stands beside the word
            near = [*w[max(i - 1, 0) : i], *w[i + 1 : i + 2]]
            counts = next((_HOW_MANY_OF[t] for t in near if t in _HOW_MANY_OF), None)
    if w and w[0] in _NODE and any(t in _LINKS for t in w[1:4]):
        lists_nodes = True  # 'nodes in rack 19 with user cpu above 50%'
    if w and w[0] in _RACK and any(t in _LINKS for t in w[1:4]):
        asks_rack = True  # 'racks with avg inlet temp > 24 °C'
    if w and w[0] in _RACK and set(w[1:]) <= {"for", "is", "in"}:
        asks_rack = True  # 'rack of node 457?', 'the rack for node 3' (the node is masked)
    how_many = ("how", "many") in set(pairwise(w))
    readings_named = any(t in _READINGS for t in w)
    return FormCues(lists_nodes=lists_nodes, asks_rack=asks_rack, asks_users=asks_users,
                counts=counts, how_many=how_many, readings_named=readings_named,
                asks_state=asks_state, job_fields=jobattrs.asked_fields(w),
                job_event=_job_event(w), running_named=_running_named(w),
                hours=hours,
                asks_duration=("how", "long") in set(pairwise(w)) or "duration" in w,
                names_nodes=any(t in _NODE for t in w),
                count_named=any(t in ("count", "number", "total", "tally") for t in w))  # fmt: skip


def _running_named(words: Sequence[str]) -> bool:
    """'running', 'ran' — not 'ran out of memory (time)', which names how the job ended."""
    return any(t in _RUNNING and words[i + 1 : i + 2] != ["out"] for i, t in enumerate(words))


# Two-word job events ('jobs that got going on 3 June' started then; blind10 W59 counted the
# jobs running that day): 'got' and 'going' alone stay filler.
_STARTED_PAIRS = frozenset({("got", "going"), ("get", "going"), ("kicked", "off"),
                            ("kick", "off"), ("got", "started"), ("fired", "up")})  # fmt: skip


def _job_event(words: Sequence[str]) -> str | None:
    started = any(t in _STARTED for t in words) or bool(_STARTED_PAIRS & set(pairwise(words)))
    ended = any(t in _ENDED for t in words)
    if started == ended:
        return None  # neither, or 'started and ended' (which window?): jobs running in it
    if ended and any(t in _STATE_WORDS for t in words):
        return None  # 'ended in the FAILED state': the final state, not the end time
    return "started" if started else "ended"


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())
