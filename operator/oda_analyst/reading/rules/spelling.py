"""One-letter typos of words the analyst knows: "averge", "failled", "hotest", "accross".

An operator types fast. A word that no vocabulary of ours holds (the lexicon, the catalogue's
metric words, the form and time words) but is one edit away from exactly one word that does —
an insertion, a deletion, a substitution or two swapped letters — is read as that word, and the
answer says so ("read 'averge' as 'average'"). Short words (under five letters), words with
digits or underscores (ids, metric names), and words two known words are equally near stay as
they are: the accounting then quotes them, which is the honest answer to a word we cannot read.
An ordinary English word is never a typo, however near a domain word it is ("supplies" is not
"supplied", "track" is not "rack"): pyspellchecker's English word list (a spell checker's, made
for the job) says which words are English.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import lru_cache

from spellchecker import SpellChecker
from spellchecker.spellchecker import WordFrequency

from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.reading.rules.accounting import load_lexicon

_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_MIN_LEN = 5
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# Words the rules read that the lexicon lists under no role (form and time cues).
_EXTRA = (
    "different distinct unique separate individual which nodes users racks jobs january february "
    "march april june july august september october november december morning afternoon evening "
    "night overnight yesterday today between utilisation utilization temperature temperatures "
    "failed hottest coldest warmest average across outside outdoor"
)


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    words = set(load_lexicon().words) | set(load_catalogue().vocabulary)
    words |= set(_EXTRA.split())
    return frozenset(w.lower() for w in words)


def _edits(word: str) -> set[str]:
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    subs = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return deletes | swaps | subs | inserts


_RARE_LEN, _RARE_USES, _MORE_COMMON = 8, 100, 20
_LONG_TYPO, _CLOSE, _APART = 7, 0.85, 0.02


@lru_cache(maxsize=1)
def english() -> WordFrequency:
    """The English words of pyspellchecker's frequency list (loaded once, ~0.2 s)."""
    return SpellChecker(language="en", distance=1).word_frequency


def correction(word: str, known: frozenset[str]) -> str | None:
    """The one known word ``word`` is a typo of, or None."""
    low = word.lower()
    if len(low) < _MIN_LEN or low in known or not low.isalpha():
        return None
    words = english()
    if low in words:  # an English word stays, save the plural of a known word
        if low.endswith("s") and low[:-1] in known:
            return low[:-1]
        # ... and a long word the list holds only as a rare misspelling of the one known word
        # it is a letter away from ('corelation': 50 uses against correlation's 1,371; 'track'
        # is 13 times as common as 'rack' and stays)
        if len(low) < _RARE_LEN or words[low] >= _RARE_USES:
            return None  # most English words: no candidates to make
        near = _near(low, known)
        if len(near) == 1 and near[0] in words and words[near[0]] >= _MORE_COMMON * words[low]:
            return near[0]
        return None
    near = _near(low, known)
    if len(near) == 1:
        return near[0]
    # 'lowst': 'lost' and 'lowest' are each a letter away; a dropped letter is the usual slip
    dropped = [w for w in near if len(w) == len(low) + 1]
    if len(dropped) == 1:
        return dropped[0]
    return _two_slips(low, known) if not near else None


def _near(low: str, known: frozenset[str]) -> list[str]:
    """The known words one slip from ``low``, in order."""
    return sorted(w for w in _edits(low) if w in known and w != low)


def _two_slips(low: str, known: frozenset[str]) -> str | None:
    """'tempreture', 'corelaton': a long word two slips from one known word, clearly closer to
    it than to any other ('utilisaton' is utilisation, not utilization)."""
    if len(low) < _LONG_TYPO:
        return None
    pool = [w for w in known if abs(len(w) - len(low)) <= 2 and w[:1] == low[:1] and w.isalpha()]
    scored = sorted(((difflib.SequenceMatcher(None, low, w).ratio(), w) for w in pool),
                    reverse=True)  # fmt: skip
    if not scored or scored[0][0] < _CLOSE:
        return None
    if len(scored) > 1 and scored[0][0] - scored[1][0] < _APART:
        return None
    return scored[0][1]


def corrected(text: str, known: Iterable[str] | None = None) -> tuple[str, tuple[str, ...]]:
    """``text`` with its typos read as the known words, and a note per correction."""
    vocab = vocabulary() if known is None else frozenset(known)
    notes: list[str] = []

    def fix(m: re.Match[str]) -> str:
        word = m.group(0)
        if "_" in text[max(m.start() - 1, 0) : m.end() + 1]:
            return word  # part of a metric name such as Gpu0_gpu_utilization
        better = correction(word, vocab)
        if better is None:
            return word
        notes.append(f"read {word!r} as {better!r}")
        return better

    out = _WORD.sub(fix, _UNIT_GLUED.sub(r"\1 \2", text))
    return out, tuple(dict.fromkeys(notes))


# '900W', '1.5kW', '35C': a level typed against its unit is the level and the unit ('2pm', '5m',
# 'p0', 'gpu0' stay: no unit follows a number there)
_UNIT_GLUED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(kw|w|°c|c)\b", re.IGNORECASE)
