"""Entity ids as both baselines read them: each keeps its own, deliberately plain, patterns for
where ids stand ('node 900 and 920'), and this reads the list that follows."""

from __future__ import annotations

import re


def ids_in(text: str) -> list[int]:
    """'900 and 920', '3, 4, 5', '10-14', '10 to 14' -> the ids."""
    out: list[int] = []
    for part in re.split(r"\s*(?:,|and|&)\s*", text):
        span = re.fullmatch(r"(\d+)\s*(?:-|to)\s*(\d+)", part.strip())
        if span:
            out.extend(range(int(span.group(1)), int(span.group(2)) + 1))
        elif part.strip().isdigit():
            out.append(int(part.strip()))
    return out


def all_ids(pattern: re.Pattern[str], text: str) -> tuple[int, ...]:
    """The ids of every match of ``pattern`` (its group 1 holds the list), first seen first."""
    return tuple(dict.fromkeys(i for m in pattern.finditer(text) for i in ids_in(m.group(1))))
