"""What no telemetry lake holds, whatever its metrics: the future, money, and actions.

'forecast the PUE for tomorrow' was asked back as 'which PUE?', and 'the electricity bill in
euros' as 'which metric do you mean by electricity bill?': a clarification that no answer can
complete. Such a question is refused at once, saying why and what the analyst can give instead.
An action ('reboot node 12', 'drain rack 4') is refused too: the analyst reads telemetry and
never acts on the system. So is a selection by submission time ('jobs submitted on 6 June'),
which the graph does not hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class OutOfScope:
    message: str
    hint: str


_FORECAST = re.compile(
    r"\b(?:forecast\w*|predict\w*|projection|extrapolat\w*|will\s+(?:be|reach|hit|exceed|fail)"
    r"|going\s+to\s+(?:be|reach|hit|fail))\b",
    re.IGNORECASE,
)
_MONEY = re.compile(
    r"[€$£]|\b(?:euros?|eur|dollars?|usd|pounds?\s+sterling|gbp|bills?|invoices?|prices?"
    r"|costs?|tariffs?|spend(?:ing)?)\b",
    re.IGNORECASE,
)
_ACTION = re.compile(
    r"^\s*(?:(?:please|pls|plz|can\s+you|could\s+you)\s+)?(?:reboot|restart|drain|undrain|resume"
    r"|shut\s*down|power\s+(?:off|on|cycle)|kill|cancel|requeue|suspend|reset|reconfigure)\b",
    re.IGNORECASE,
)
# 'jobs submitted on 6 June': the graph selects jobs by when they ran, started or ended; read
# as 'ran', the count answered another question ('who submitted job J' names its user).
_SUBMITTED = re.compile(
    r"\b(?:submi(?:tted|ssions?|t)|queued\s+up)\b(?!\s+(?:by|job)\b)(?!.*\bwho\b)",
    re.IGNORECASE,
)
_INSTEAD = (
    "ask about what the lake recorded: readings, statistics and jobs up to the reference time "
    "(e.g. 'average PUE on 1 June 2022', 'node power of rack 3 yesterday')"
)


def out_of_scope(question: str) -> OutOfScope | None:
    """Why the question asks for what no telemetry holds, or None."""
    if _ACTION.search(question):
        return OutOfScope(
            "the analyst reads telemetry and never acts on the system (no reboots, drains or "
            "job control)",
            "use the site's own tools for actions; " + _INSTEAD,
        )
    if _FORECAST.search(question):
        return OutOfScope(
            "the question asks for a forecast, and the lake holds only what was measured",
            _INSTEAD,
        )
    if _SUBMITTED.search(question) and not re.match(r"\W*who\b", question, re.IGNORECASE):
        return OutOfScope(
            "the analyst selects jobs by when they ran, started or ended; their submission "
            "time is not in its graph",
            "ask for the jobs that started (e.g. 'how many jobs started on 6 June 2022')",
        )
    if _MONEY.search(question):
        return OutOfScope(
            "the question asks for money (a bill, a cost, a price), and the lake holds no tariff "
            "or currency",
            "ask for the energy instead (e.g. 'total energy of the panels on 1 June 2022'), "
            "then apply your tariff",
        )
    return None
