"""What no telemetry lake holds (``ontology/scope.yaml``): the future, money and actions on the
system. A question that asks for one is refused at once, saying
why; the words that decide it are data, matched over the reader's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from oda_analyst.config import get_settings
from oda_analyst.errors import OntologyError

if TYPE_CHECKING:
    from spacy.tokens import Doc


@dataclass(frozen=True)
class ScopeKind:
    name: str
    words: tuple[tuple[str, ...], ...]  # each phrase as its lower-case words; 'x*' a prefix
    opening: tuple[tuple[str, ...], ...]
    polite: tuple[tuple[str, ...], ...]
    not_followed: frozenset[str]
    message: str
    hint: str


@dataclass(frozen=True)
class Hit:
    kind: ScopeKind
    start: int  # word indices (out_of_scope turns them into characters)
    end: int


def _phrases(raw: Any) -> tuple[tuple[str, ...], ...]:
    # words split on spaces ('forecast*' stays one pattern; the tokenizer would split the '*')
    return tuple(tuple(str(p).lower().split()) for p in raw or ())


@lru_cache(maxsize=4)
def load_scope(path: Path | None = None) -> tuple[ScopeKind, ...]:
    """The kinds of ``<ODA_ONTOLOGY_DIR>/scope.yaml``, in the order they are checked."""
    where = path or get_settings().ontology_dir / "scope.yaml"
    try:
        raw = yaml.safe_load(where.read_text(encoding="utf-8"))["kinds"]
        return tuple(
            ScopeKind(
                name=str(name),
                words=_phrases(spec.get("words")),
                opening=_phrases(spec.get("opening")),
                polite=_phrases(spec.get("polite")),
                not_followed=frozenset(str(w).lower() for w in spec.get("not_followed") or ()),
                message=" ".join(str(spec["message"]).split()),
                hint=" ".join(str(spec["hint"]).split()),
            )
            for name, spec in raw.items()
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise OntologyError(
            f"cannot read the scope vocabulary {where}: {err}",
            hint="check ODA_ONTOLOGY_DIR and that scope.yaml has kinds with message and hint",
        ) from None


def _at(words: list[str], i: int, phrase: tuple[str, ...]) -> bool:
    if i + len(phrase) > len(words):
        return False
    for word, want in zip(words[i : i + len(phrase)], phrase, strict=True):
        if want.endswith("*") and len(want) > 1:
            if not word.startswith(want[:-1]):
                return False
        elif word != want:
            return False
    return True


def _opening(words: list[str], kind: ScopeKind) -> Hit | None:
    i, moved = 0, True
    while moved:  # 'please', 'can you' before the verb
        moved = False
        for phrase in kind.polite:
            if _at(words, i, phrase):
                i, moved = i + len(phrase), True
                break
    for phrase in kind.opening:
        if _at(words, i, phrase):
            return Hit(kind, i, i + len(phrase))
    return None


def _anywhere(words: list[str], kind: ScopeKind) -> Hit | None:
    for i in range(len(words)):
        for phrase in kind.words:
            if not _at(words, i, phrase):
                continue
            after = words[i + len(phrase) : i + len(phrase) + 1]
            if kind.not_followed and (
                set(after) & kind.not_followed or "who" in words[i:] or words[0] == "who"
            ):
                continue  # 'submitted by user 12', 'who submitted job J'
            return Hit(kind, i, i + len(phrase))
    return None


def out_of_scope(doc: Doc, kinds: tuple[ScopeKind, ...]) -> tuple[ScopeKind, int, int] | None:
    """The first kind (in the file's order) the question asks for, with the character offsets
    of its words, or None."""
    tokens = [t for t in doc if not t.is_space]
    words = [t.lower_ for t in tokens]
    for kind in kinds:
        hit = _opening(words, kind) if kind.opening else _anywhere(words, kind)
        if hit is not None:
            last = tokens[hit.end - 1]
            return kind, tokens[hit.start].idx, last.idx + len(last.text)
    return None
