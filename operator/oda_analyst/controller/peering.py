"""Replicas of the operator under kopf's peering: one active, the others standing by.

kopf pauses a replica while a live peer of higher priority exists and freezes every replica of
a tied priority, so each replica needs its own. Ranking by start time keeps the longest-running
replica active: a replica that restarts (a rollout, a crash) comes back as a standby instead of
taking over queries mid-flight.
"""

from __future__ import annotations

TOP = 2**62  # peer priorities are JSON integers in the peering object's status (int64)


def peering_priority(started_ns: int) -> int:
    """The priority of a replica started at ``started_ns`` (ns since the epoch): earlier
    starts rank higher; two replicas tie only if started in the same microsecond."""
    return TOP - started_ns // 1000
