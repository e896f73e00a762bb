"""The reader's tokenizer and matchers: spaCy's blank English pipeline (no model to download) with
a ``PhraseMatcher`` built from the analysis vocabulary and a ``Matcher`` for the few shapes a
phrase list cannot say (``p95``, ``95th percentile``, ``top-5``, ``per rack``).

Built once per vocabulary and shared: spaCy's tokenizer and matchers only read their tables when
called, so one instance serves concurrent requests (tests/unit/test_reading.py runs it from many
threads).
"""

from __future__ import annotations

import functools
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oda_analyst.reading.rules import spelling
from oda_analyst.reading.vocabulary import Vocabulary

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

GROUP_KINDS = ("node", "nodes", "rack", "racks", "user", "users", "partition", "partitions",
               "gpu", "gpus", "job", "jobs", "hour", "hours", "day", "days", "week", "weeks",
               "minute", "minutes", "socket", "sockets", "cpu", "cpus", "state", "states",
               "qos")  # fmt: skip
# 'every node' alone names all nodes ('p95 over every node' pools them); 'for every node' groups
_GROUP_WORDS = ("per", "each", "by")
_BUCKET_WORDS = {"hourly": "hour", "daily": "day", "weekly": "week", "minutely": "minute"}
_RANK_TOP = ("top", "highest", "most", "largest", "biggest", "max", "busiest", "hottest")
_RANK_BOTTOM = ("bottom", "lowest", "least", "smallest", "min", "coolest", "coldest")
_COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10}  # fmt: skip


@dataclass(frozen=True)
class Match:
    label: str
    start: int  # token index
    end: int


@functools.cache
def blank_english() -> Language:
    """spaCy's blank English pipeline (a tokenizer; no model), loaded once per process."""
    # thinc (under spaCy) imports torch when it is installed, ~3 s of a CLI start on our 2-core
    # machines; the blank pipeline never runs a torch layer, so torch is hidden while it loads.
    hidden = "torch" not in sys.modules
    if hidden:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import spacy  # noqa: PLC0415

        return spacy.blank("en")
    finally:
        if hidden:
            del sys.modules["torch"]


class Matchers:
    """The pipeline and its matchers for one vocabulary."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.nlp = blank_english()  # first: spaCy is imported there, with torch hidden
        from spacy.matcher import Matcher, PhraseMatcher  # noqa: PLC0415

        # NORM: a token's norm is its lower case, or the word a one-letter typo of it misses
        # ('avrages'), so that the analysis words are read as the retrieval's are (``doc``)
        self.phrases = PhraseMatcher(self.nlp.vocab, attr="NORM")
        # the words a typo may be of: the analysis vocabulary's and the retrieval's
        phrases = [
            *(p for _, words in (*vocab.charts, *vocab.statistics) for p in words),
            *vocab.unspecified,
            *vocab.report_verbs,
            *vocab.comparison,
            *vocab.declined,
        ]
        self.known = frozenset(w for p in phrases for w in p.split()) | spelling.vocabulary()
        for kind, words in vocab.charts:
            self._add(f"CHART:{kind}", words)
        self._add("UNSPEC", vocab.unspecified)
        for name, words in vocab.statistics:
            self._add(f"STAT:{name}", words)
        self._add("REPORT", vocab.report_verbs)
        self._add("DECLINE", vocab.declined)
        self._add("COMPARE", vocab.comparison)
        self.shapes = Matcher(self.nlp.vocab)
        self.shapes.add("PCT_P", [[{"LOWER": {"REGEX": r"^p\d{1,2}(\.\d+)?$"}}]])
        # the norm, so that a typo of the word ('95th percentle') is read as the phrases' are
        self.shapes.add("PCT_NTH", [
            [{"LOWER": {"REGEX": r"^\d{1,2}(\.\d+)?(st|nd|rd|th)?$"}},
             {"NORM": {"IN": ["percentile", "centile", "pct", "%ile"]}}],
        ])  # fmt: skip
        self.shapes.add("RANK", [
            [{"LOWER": {"REGEX": r"^(top|bottom)-?\d{1,3}$"}}],
            [{"LOWER": {"IN": ["top", "bottom"]}}, {"LOWER": {"REGEX": r"^\d{1,3}$"}}],
            [{"LOWER": {"IN": ["top", "bottom"]}}, {"LOWER": {"IN": list(_COUNT_WORDS)}}],
        ])  # fmt: skip
        self.shapes.add("GROUP", [
            [{"LOWER": {"IN": list(_GROUP_WORDS)}}, {"LOWER": {"IN": list(GROUP_KINDS)}}],
            [{"LOWER": "for"}, {"LOWER": {"IN": ["each", "every"]}},
             {"LOWER": {"IN": list(GROUP_KINDS)}}],
            [{"LOWER": {"REGEX": r"^per-(node|rack|user|gpu|job|hour|day|partition|minute)$"}}],
            [{"LOWER": {"IN": list(_BUCKET_WORDS)}}],
            # 'rack by rack', 'day by day' (the reader keeps those that say one kind twice)
            [{"LOWER": {"IN": list(GROUP_KINDS)}}, {"LOWER": "by"},
             {"LOWER": {"IN": list(GROUP_KINDS)}}],
            # a grid's two axes, 'node x hour': per node and per hour
            [{"LOWER": {"IN": list(GROUP_KINDS)}}, {"LOWER": {"IN": ["x", "×"]}}],
            [{"LOWER": {"IN": ["x", "×"]}}, {"LOWER": {"IN": list(GROUP_KINDS)}}],
        ])  # fmt: skip
        self.shapes.add("WINDOW_LEN", [
            [{"LOWER": {"REGEX": r"^\d{1,4}(\.\d+)?$"}}, {"ORTH": "-", "OP": "?"},
             {"LOWER": {"IN": ["min", "mins", "minute", "minutes", "m", "h", "hr", "hrs",
                               "hour", "hours", "s", "sec", "secs", "second", "seconds"]}}],
            [{"LOWER": {"REGEX": r"^\d{1,4}(\.\d+)?(min|mins|m|h|hr|hrs|s|sec)$"}}],
        ])  # fmt: skip

    def _add(self, label: str, words: tuple[str, ...]) -> None:
        self.phrases.add(label, [self.nlp.make_doc(w) for w in words])

    def doc(self, text: str) -> Doc:
        doc = self.nlp.make_doc(text)
        for token in doc:
            better = spelling.correction(token.text, self.known) if token.is_alpha else None
            if better is not None:
                token.norm_ = better
        return doc

    def phrase_matches(self, doc: Doc) -> list[Match]:
        """Vocabulary phrases, the longest winning where two overlap."""
        from spacy.util import filter_spans  # noqa: PLC0415

        found = self.phrases(doc)
        spans = [doc[s:e] for _, s, e in found]
        labels = {(s, e): self.nlp.vocab.strings[m] for m, s, e in found}
        return [Match(labels[(sp.start, sp.end)], sp.start, sp.end) for sp in filter_spans(spans)]

    def shape_matches(self, doc: Doc) -> list[Match]:
        return [Match(self.nlp.vocab.strings[m], s, e) for m, s, e in self.shapes(doc)]


_LOCK = threading.Lock()
_CACHE: dict[int, Matchers] = {}


def matchers(vocab: Vocabulary) -> Matchers:
    """The shared matchers of a vocabulary (built on first use: loading spaCy takes a second)."""
    key = id(vocab)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = Matchers(vocab)
        return found


def count_word(text: str) -> int | None:
    low = text.lower()
    if low.isdigit() and len(low) <= 4:  # a count, never an id or a pasted blob of digits
        return int(low)
    return _COUNT_WORDS.get(low)


def rank_direction(word: str) -> str | None:
    low = word.lower()
    if low in _RANK_TOP:
        return "top"
    if low in _RANK_BOTTOM:
        return "bottom"
    return None


def bucket_of(word: str) -> str | None:
    return _BUCKET_WORDS.get(word.lower())
