"""Number words that are ids: 'gpu two', 'cpu one', 'socket zero', 'node five', 'psu one and two'.

An id is read right after its keyword (``entities``), in digits. Spelt out, the words were left
over: 'gpu two utilisation' pooled all four GPUs and 'cpu one power' both sockets, answers to
more than was asked. Here a list of number words right after an id keyword is written in digits
before the rules read the words ('gpu two' -> 'gpu 2'); nothing else changes ('which one', 'one
of the nodes', 'the top three' keep their words).
"""

from __future__ import annotations

import re

_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_NUMBER = "|".join(_WORDS)
_KEYWORD = r"gpus?|cpus?|sockets?|psus?|power[\s-]+suppl(?:y|ies)|nodes?|racks?"
_LIST = re.compile(
    rf"\b(?P<key>{_KEYWORD})(?P<gap>[\s#-]+)(?P<ids>(?:{_NUMBER})(?:\s*(?:,|and|or|&)\s*"
    rf"(?:{_NUMBER}))*)\b(?!\s*(?:nodes?|gpus?|cpus?|racks?|hours?|days?|minutes?)\b)",
    re.IGNORECASE,
)
_ONE = re.compile(rf"\b(?:{_NUMBER})\b", re.IGNORECASE)


def numerals(text: str) -> str:
    """``text`` with the number words of id lists in digits ('gpu two and three' -> 'gpu 2 and
    3')."""

    def digits(m: re.Match[str]) -> str:
        ids = _ONE.sub(lambda w: str(_WORDS[w.group().lower()]), m["ids"])
        return f"{m['key']}{m['gap']}{ids}"

    return _LIST.sub(digits, text)
