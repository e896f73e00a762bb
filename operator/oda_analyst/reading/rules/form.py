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
_ENDED = frozenset({"ended", "end", "ending", "finished", "finish", "finishing", "terminated",
                    "stopped", "wrapped"})  # fmt: skip
# 'jobs submitted on 8 June' (not 'submitted by user 12'): the window selects the submission
_SUBMITTED = frozenset({"submitted", "submit", "submits", "submission", "submissions",
                        "enqueued"})  # fmt: skip
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
        if tok == "count" and counts is None and i >= 2 and w[i - 2] in _SCHEDULER_STATES:
            continue  # 'idle node count', 'the allocated node count': Slurm's own series
        if tok == "count" and counts is None:
            # 'node count of job J', 'count of users': what is counted stands beside the word
            near = [*w[max(i - 1, 0) : i], *w[i + 1 : i + 2]]
            counts = next((_HOW_MANY_OF[t] for t in near if t in _HOW_MANY_OF), None)
    if w and w[0] in _NODE and any(t in _LINKS for t in w[1:4]):
        lists_nodes = True  # 'nodes in rack 19 with user cpu above 50%'
    if w and w[0] in _RACK and any(t in _LINKS for t in w[1:4]):
        asks_rack = True  # 'racks with avg inlet temp > 24 °C'
    if len(w) > 1 and w[0] in _USERS and w[1] in ("whose", "who", "that"):
        asks_users = True  # 'users whose jobs died …', 'users who had an OOM job on 6 June'
    if w and w[0] in _RACK and set(w[1:]) <= {"for", "is", "in"}:
        asks_rack = True  # 'rack of node 457?', 'the rack for node 3' (the node is masked)
    how_many = ("how", "many") in set(pairwise(w))
    if counts is None and w[-2:] == ["how", "many"]:
        # 'distinct nodes touched by jobs that got cancelled on 8 jun - how many?': the thing
        # counted leads the question
        lead = [t for t in w[:3] if t not in _COUNTED]
        counts = _HOW_MANY_OF.get(lead[0]) if lead else None
    readings_named = any(t in _READINGS for t in w)
    return FormCues(lists_nodes=lists_nodes, asks_rack=asks_rack, asks_users=asks_users,
                counts=counts, how_many=how_many, readings_named=readings_named,
                asks_state=asks_state, job_fields=jobattrs.asked_fields(w),
                job_event=_job_event(w), running_named=_running_named(w),
                hours=hours,
                asks_duration=("how", "long") in set(pairwise(w)) or "duration" in w,
                names_nodes=any(t in _NODE for t in w),
                count_named=any(t in ("count", "number", "total", "tally") for t in w))  # fmt: skip


_SCHEDULER_STATES = frozenset({"idle", "allocated", "alloc", "down", "drained", "mixed"})


def _running_named(words: Sequence[str]) -> bool:
    """'running', 'ran' — not 'ran out of memory (time)', which names how the job ended, nor
    'run times', which names how long the jobs ran (of the jobs an event selects)."""
    return any(t in _RUNNING and not set(words[i + 1 : i + 2]) & _NOT_RUNNING
               for i, t in enumerate(words))  # fmt: skip


_NOT_RUNNING = frozenset({"out", "time", "times", "length", "lengths", "duration", "durations"})


def _job_event(words: Sequence[str]) -> str | None:
    # two-word events ('got going', 'kicked off') reach here as the lexicon's synonyms read them
    started = any(t in _STARTED for t in words)
    # 'how the jobs started on 7 june ended up': how they turned out, no end event (it made
    # 'started' and 'ended' cancel out, and the jobs running that day were counted)
    ended = any(t in _ENDED and not (t.startswith("end") and words[i + 1 : i + 2] == ["up"])
                for i, t in enumerate(words))  # fmt: skip
    submitted = any(t in _SUBMITTED and words[i + 1 : i + 2] != ["by"]
                    for i, t in enumerate(words))  # fmt: skip
    if submitted:
        # 'jobs submitted on 8 June'; with a start or end named too, which window is unclear
        return "submitted" if not (started or ended) else None
    if started == ended:
        return None  # neither, or 'started and ended' (which window?): jobs running in it
    if ended and _state_after_end(words):
        return None  # 'ended in the FAILED state': the final state, not the end time
    return "started" if started else "ended"


def _state_after_end(words: Sequence[str]) -> bool:
    """'ended in FAILED', 'finished as cancelled', 'ended up failing': an end verb that names
    the final state, not the end time. A question asking how the jobs finished ('how the jobs
    that ended on 4 June finished (completed, failed …)', 'jobs that ended, by state') names the
    end as the event and the states as its groups, unless an end verb leads into a state."""
    grouped = any(
        (a == "how" and b not in ("many", "much", "long", "often"))
        or (a in ("per", "each", "by", "every") and b in ("state", "states", "status", "final",
                                                          "outcome", "outcomes"))
        for a, b in pairwise([*words, ""])
    )  # fmt: skip
    for i, t in enumerate(words):
        nxt = words[i + 1 : i + 4] if t in _ENDED else []
        if (
            nxt[:1]
            and nxt[0] in ("in", "as", "with", "up")
            and any(n in _STATE_WORDS for n in nxt[1:])
        ):
            return True
        if nxt[:1] and nxt[0] in _STATE_WORDS and not grouped:
            return True  # 'ended cancelled'
    return not grouped and any(t in _STATE_WORDS for t in words)


def asks_which_one(words: Sequence[str]) -> bool:
    """'did node 398 or 399 go above 40 C? which one', 'which of the two': the question asks
    which of the entities it names (their kind is the entities', not these words')."""
    return any(a in _LISTERS and b in ("one", "ones", "of") and (b != "of" or c in
               ("them", "the", "those", "these", "both", "two"))
               for a, b, c in zip(words, words[1:], [*words[2:], ""], strict=False))  # fmt: skip


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())
