"""The lexicon's phrases beyond its roles, kept as data in ``ontology/lexicon.yaml`` so that a site
adds its own words there: the parts of the day the time parser reads ('afternoon', 'lunchtime',
'first thing'; ``day_parts``), the everyday phrases read as words the rules know ('kicked off'
is 'started'; ``synonyms``), the vague levels asked about ('really hot'; ``vague_levels``) and
the adjectives that say a quantity and which way it goes ('windier', 'quietest'; ``qualities``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError
from oda_analyst.reading.model import TIME_UNIT_SECONDS

LEXICON_FILE = "lexicon.yaml"


@dataclass(frozen=True)
class DayPart:
    """Hours of the day in UTC, [start, end); ``ask``: no agreed hours when said alone."""

    start: int
    end: int
    ask: bool = False


def load_day_parts(path: Path | None = None) -> dict[str, DayPart]:
    """The day parts of ``<ODA_ONTOLOGY_DIR>/lexicon.yaml`` (read once per path)."""
    return _day_parts(path or get_settings().ontology_dir / LEXICON_FILE)


def load_synonyms(path: Path | None = None) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The synonyms of ``<ODA_ONTOLOGY_DIR>/lexicon.yaml`` as (whole-phrase pattern, words),
    longer phrases first (read once per path)."""
    return _synonyms(path or get_settings().ontology_dir / LEXICON_FILE)


def with_synonyms(text: str) -> str:
    """``text`` with every synonym phrase read as the words it stands for."""
    for pattern, words in load_synonyms():
        text = pattern.sub(words, text)
    return text


def role_words(role: str, path: Path | None = None) -> frozenset[str]:
    """The words of one role of the lexicon ('entity': rack, node, gpu …)."""
    words = _section(path or get_settings().ontology_dir / LEXICON_FILE, "roles").get(role)
    return frozenset(str(w).lower() for w in words) if isinstance(words, list) else frozenset()


def load_time_units(path: Path | None = None) -> dict[str, str]:
    """The words a duration's unit is asked by ('minutes' -> 'min'), from ``time_units``."""
    return _time_units(path or get_settings().ontology_dir / LEXICON_FILE)


@functools.cache
def _time_units(path: Path) -> dict[str, str]:
    raw = _section(path, "time_units")
    out = {str(w).lower(): str(u) for w, u in raw.items()}
    wrong = sorted(u for u in set(out.values()) if u not in TIME_UNIT_SECONDS)
    if wrong:
        raise OntologyError(f"{path}: time_units name {wrong}, not one of "
                            f"{sorted(TIME_UNIT_SECONDS)}", hint="e.g. 'mins: min'")  # fmt: skip
    return out


@functools.cache
def _section(path: Path, name: str) -> dict[object, object]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise OntologyError(f"cannot read the lexicon {path}: {exc}",
                            hint="restore ontology/lexicon.yaml") from None  # fmt: skip
    raw = data.get(name) if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise OntologyError(f"{path}: expected a mapping '{name}:'",
                            hint="see the header of ontology/lexicon.yaml")  # fmt: skip
    return raw


@functools.cache
def _synonyms(path: Path) -> tuple[tuple[re.Pattern[str], str], ...]:
    raw = _section(path, "synonyms")
    out = []
    for phrase, words in sorted(raw.items(), key=lambda kv: -len(str(kv[0]))):
        if not (isinstance(phrase, str) and isinstance(words, str) and phrase.strip()):
            raise OntologyError(f"{path}: synonym {phrase!r}: {words!r} must be two phrases",
                                hint="e.g. 'kicked off: started'")  # fmt: skip
        out.append((re.compile(rf"(?<![\w'’]){_phrase(phrase)}(?![\w'’])", re.IGNORECASE), words))
    return tuple(out)


@functools.cache
def _day_parts(path: Path) -> dict[str, DayPart]:
    raw = _section(path, "day_parts")
    out: dict[str, DayPart] = {}
    for words, value in raw.items():
        ok = (isinstance(value, list) and len(value) in (2, 3)
              and all(isinstance(h, int) for h in value[:2])
              and 0 <= value[0] < value[1] <= 24 and value[2:] in ([], ["ask"]))  # fmt: skip
        if not ok or not isinstance(value, list):
            raise OntologyError(f"{path}: day part {words!r} must be [from, to] or [from, to, ask] "
                                f"with hours 0-24, not {value!r}",
                                hint="e.g. 'lunchtime: [12, 14]'")  # fmt: skip
        out[" ".join(str(words).lower().split())] = DayPart(value[0], value[1], len(value) == 3)
    return out


def vague_pattern(path: Path | None = None) -> re.Pattern[str]:
    """A vague level phrase: an optional intensifier, a level, not before a term's word. Group
    ``hint``: the level when it hints at a quantity ('hot')."""
    return _vague(path or get_settings().ontology_dir / LEXICON_FILE)


def _phrase(words: str) -> str:
    """A phrase as a regex: its words, any run of spaces between them, any case they are in."""
    return r"\s+".join(map(re.escape, words.lower().split()))


def _alternation(words: Iterable[str]) -> str:
    """Phrases as one regex alternation, longer phrases first ('late evening' before 'evening')."""
    return "|".join(_phrase(w) for w in sorted(words, key=len, reverse=True))


@functools.cache
def _vague(path: Path) -> re.Pattern[str]:
    raw = _section(path, "vague_levels")
    lists: dict[str, list[str]] = {}
    for key in ("intensifiers", "levels", "not_before", "hinting"):
        words = raw.get(key)
        if not (isinstance(words, list) and words and all(isinstance(w, str) for w in words)):
            raise OntologyError(f"{path}: vague_levels needs a word list {key!r}",
                                hint="see the header of ontology/lexicon.yaml")  # fmt: skip
        lists[key] = words
    hinting = [w for w in lists["levels"] if w in lists["hinting"]]
    others = [w for w in lists["levels"] if w not in lists["hinting"]]
    return re.compile(
        rf"\b(?:(?:{_alternation(lists['intensifiers'])})\s+)?"
        rf"(?:(?P<hint>{_alternation(hinting)})|{_alternation(others)})\b"
        rf"(?![\s-]*(?:{_alternation(lists['not_before'])})\b)",
        re.IGNORECASE,
    )


def day_part_pattern(path: Path | None = None) -> str:
    """The day parts' words as a regex alternation (built once per path)."""
    return _day_part_pattern(path or get_settings().ontology_dir / LEXICON_FILE)


@functools.cache
def _day_part_pattern(path: Path) -> str:
    return _alternation(_day_parts(path))


Degree = Literal["positive", "comparative", "superlative"]
_DEGREES: tuple[Degree, ...] = ("positive", "comparative", "superlative")
# The rules' own direction words, by direction and degree.
_DIRECTION_WORDS = {
    ("up", "comparative"): "higher", ("up", "superlative"): "highest",
    ("down", "comparative"): "lower", ("down", "superlative"): "lowest",
}  # fmt: skip
_HOW_LAST = r"(?=\s*(?:[,;:.!?)]|\band\b|\bplus\b|\balso\b|$))"


@dataclass(frozen=True)
class Quality:
    """One form of a quality adjective: the quantity it names, which way, which degree."""

    quantity: str
    direction: Literal["up", "down"]
    degree: Degree
    always: bool  # the words say the statistic whatever the question names


def load_qualities(path: Path | None = None) -> dict[str, Quality]:
    """The qualities of ``<ODA_ONTOLOGY_DIR>/lexicon.yaml`` by form ('windier' -> wind speed,
    up, comparative), read once per path."""
    return _qualities(path or get_settings().ontology_dir / LEXICON_FILE)


def with_qualities(text: str, *, named: bool) -> str:
    """``text`` with each comparative or superlative quality said as the rules' direction word
    ('quietest' -> 'lowest'), with its quantity where the question names none (``named``
    False: 'windier' -> 'higher wind speed'); beside a quantity named, 'how warm' at a clause's
    end goes (it asks only the figure the answer states)."""
    for form, pattern, quality in _quality_patterns(get_settings().ontology_dir / LEXICON_FILE):
        if quality.degree == "positive":
            if named and not quality.always:
                text = re.sub(rf"\bhow\s+{_phrase(form)}\b{_HOW_LAST}", " ", text, flags=re.I)
            continue
        words = _DIRECTION_WORDS[(quality.direction, quality.degree)]
        if quality.always or not named:
            words = f"{words} {quality.quantity}"
        text = pattern.sub(words, text)
    return text


@functools.cache
def _quality_patterns(path: Path) -> tuple[tuple[str, re.Pattern[str], Quality], ...]:
    found = sorted(_qualities(path).items(), key=lambda kv: -len(kv[0]))  # 'most erratic' first
    return tuple(
        (form, re.compile(rf"(?<![\w'’-]){_phrase(form)}(?![\w'’-])", re.IGNORECASE), quality)
        for form, quality in found
    )


@functools.cache
def _qualities(path: Path) -> dict[str, Quality]:
    raw = _section(path, "qualities")
    out: dict[str, Quality] = {}
    for quantity, entry in raw.items():
        if not (isinstance(quantity, str) and isinstance(entry, dict)):
            raise OntologyError(
                f"{path}: quality {quantity!r} must map to up/down form lists",
                hint="e.g. 'wind speed: {up: [[windy, windier, windiest]]}'",
            )
        always = entry.get("always", False) is True
        for direction in ("up", "down"):
            for forms in entry.get(direction, []):
                if not (isinstance(forms, list) and len(forms) == 3
                        and all(isinstance(f, str) and f.strip() for f in forms)):  # fmt: skip
                    raise OntologyError(
                        f"{path}: quality {quantity!r} {direction}: {forms!r} must be "
                        "[positive, comparative, superlative] ('-' for a form not said)",
                        hint="e.g. [windy, windier, windiest]",
                    )
                for degree, form in zip(_DEGREES, forms, strict=True):
                    if form != "-":
                        key = " ".join(form.lower().split())
                        out[key] = Quality(quantity, direction, degree, always)
    return out
