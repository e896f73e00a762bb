"""A faster copy of rdflib's SPARQL query grammar, for the validator only.

rdflib registers a ``#`` comment pattern as "ignorable" on every element of its grammar, and
pyparsing tries it before each token: about 40 % of the parse time. The validator parses a
private deep copy with that pattern removed, after blanking comments itself; the parse tree is
the same (tests compare it with rdflib's on every curated example) and rdflib's own grammar, used
by the rest of the process, is untouched. On any failure rdflib's parser decides and words the
error, so the copy can never accept what rdflib rejects.

pyparsing is not thread-safe: the first call of each parse action finds its arity by trial,
writing the answer into a closure that rdflib's grammar and the copy share (``copy.deepcopy``
keeps functions), so two threads parsing at once on a cold process can record a wrong arity and
every later parse fails (``<lambda>() missing 1 required positional argument``). Every parse in
this package therefore goes through ``PARSE_LOCK`` (``parse_tree``, ``parse_update_tree``).
Parsing holds the GIL throughout, so the lock costs no throughput; ``bench/parse_concurrency.py``
measures it against a per-thread grammar and a process pool.
"""

from __future__ import annotations

import copy
import re
import sys
import threading
from functools import lru_cache
from typing import Any

from pyparsing import Opt, ParseBaseException, ParserElement
from rdflib.plugins.sparql import parser as rdflib_parser
from rdflib.plugins.sparql.parser import parseQuery, parseUpdate

# Held by every pyparsing parse of SPARQL in this process (see the module docstring).
PARSE_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _fast_grammar() -> ParserElement:
    """A private copy of rdflib's query grammar without its comment skipping.

    pyparsing tries the ``#`` comment pattern before every token, about 40 % of the parse time;
    comments are blanked once by ``strip_comments`` instead. rdflib's own grammar, which the
    rest of the process uses, stays untouched.
    """
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        # Opt's "no default" sentinel is compared by identity: it must not be copied.
        sentinel = getattr(Opt, "_Opt__optionalNotMatched", None)
        memo = {id(sentinel): sentinel} if sentinel is not None else {}
        grammar: ParserElement = copy.deepcopy(rdflib_parser.Query, memo)
    finally:
        sys.setrecursionlimit(old)
    seen: set[int] = set()
    stack: list[ParserElement] = [grammar]
    while stack:
        element = stack.pop()
        if id(element) in seen:
            continue
        seen.add(id(element))
        element.ignoreExprs = []
        stack.extend(getattr(element, "exprs", None) or [])
        inner = getattr(element, "expr", None)
        if isinstance(inner, ParserElement):
            stack.append(inner)
    return grammar


# A string or an IRI (kept), or a comment (blanked).
_COMMENT_OR_TOKEN = re.compile(
    r'("""[\s\S]*?"""|' + r"'''[\s\S]*?'''|" + r'"(?:[^"\\\n]|\\.)*"|' + r"'(?:[^'\\\n]|\\.)*'"
    r'|<[^<>"{}|^`\\\s]*>)|(#[^\n]*)'
)


def strip_comments(text: str) -> str:
    """Blank ``#`` comments (not inside IRIs or strings), keeping every line and column."""
    if "#" not in text:
        return text
    return _COMMENT_OR_TOKEN.sub(lambda m: m.group(1) or " " * len(m.group(2)), text)


def parse_tree(text: str) -> Any:
    """rdflib's parse tree of a query: the fast grammar first, rdflib's own on any failure."""
    source = rdflib_parser.expandUnicodeEscapes(text)
    with PARSE_LOCK:
        try:
            return _fast_grammar().parse_string(strip_comments(source), parse_all=True)
        except ParseBaseException:
            return parseQuery(text)  # the reference parser decides, and words the error


def parse_update_tree(text: str) -> Any:
    """rdflib's parse tree of a SPARQL update (raises pyparsing's ParseBaseException)."""
    with PARSE_LOCK:
        return parseUpdate(text)
