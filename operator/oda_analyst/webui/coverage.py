"""The span of time the lake covers, as the page shows it beside the reference-time control (pure).

Built from the lake's month folders (``YY-MM``, a listing: no data read), so it is as fine as a
month: a month present may hold only some of its days. The page uses it to say at once that a
reference time lies outside the lake, before any question is sent.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

_MONTH = re.compile(r"^(\d{2})-(\d{2})$")


@dataclass(frozen=True)
class Coverage:
    """The lake's months, first to last; ``gaps``: whether some month between them is absent."""

    first: date
    last: date
    gaps: bool = False

    def text(self) -> str:
        """'June 2022', 'May – June 2022', 'December 2021 – June 2022 (with gaps)'."""
        if (self.first.year, self.first.month) == (self.last.year, self.last.month):
            span = f"{self.first:%B %Y}"
        elif self.first.year == self.last.year:
            span = f"{self.first:%B} – {self.last:%B %Y}"
        else:
            span = f"{self.first:%B %Y} – {self.last:%B %Y}"
        return span + (" (with gaps)" if self.gaps else "")

    def end(self) -> datetime:
        """Midnight after the lake's last day: as a reference time, 'yesterday' is that day."""
        return datetime.combine(self.last + timedelta(days=1), time(), tzinfo=UTC)

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first.isoformat(), "last": self.last.isoformat(), "text": self.text()}


def from_months(months: Iterable[str]) -> Coverage | None:
    """The coverage of the lake's ``YY-MM`` month folders (None: no month, nothing to show)."""
    found = sorted(
        (2000 + int(m.group(1)), int(m.group(2)))
        for m in (_MONTH.match(name) for name in months)
        if m and 1 <= int(m.group(2)) <= 12
    )
    if not found:
        return None
    (y0, m0), (y1, m1) = found[0], found[-1]
    span = (y1 - y0) * 12 + (m1 - m0) + 1
    last = date(y1, m1, calendar.monthrange(y1, m1)[1])
    return Coverage(date(y0, m0, 1), last, gaps=len(set(found)) < span)
