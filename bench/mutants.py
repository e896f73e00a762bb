"""Mutants of valid SPARQL queries for the validator benchmark, with an independent oracle.

Each mutation operator edits the query text and says itself whether the result breaks the
ontology: it reads the triples with its own small tokenizer (not rdflib, not the validator) and
checks the replacement against the ontology model directly (domain, range, disjointness,
datatype families). A mutant the oracle finds still valid (a predicate replaced by a compatible
one, a class by a compatible class) is "valid by chance" and counted apart by the benchmark.

Kinds: wrong_predicate, wrong_class, swapped_triple, wrong_datatype, unbound_projection,
ungrouped_projection, disconnected_pattern, injection. ``generate(golds, kind, n, seed)`` is
deterministic.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from oda_analyst.ontology.model import OntologyModel, OntProperty
from oda_analyst.ontology.namespaces import INSTANCE_KINDS, INSTANCE_NS, ONTOLOGY_NS, XSD_NS

KINDS = (
    "wrong_predicate",
    "wrong_class",
    "swapped_triple",
    "wrong_datatype",
    "unbound_projection",
    "ungrouped_projection",
    "disconnected_pattern",
    "injection",
)
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


@dataclass(frozen=True)
class Gold:
    id: str
    sparql: str


@dataclass(frozen=True)
class Mutant:
    kind: str
    gold_id: str
    sparql: str
    violating: bool  # the oracle's verdict: the mutant breaks the ontology or the contract
    note: str


# -- tokens ------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<comment>\#[^\n]*)
    |(?P<string>(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')(?:@[A-Za-z-]+|\^\^(?:<[^>\s]*>|[A-Za-z][\w-]*:[\w-]*))?)
    |(?P<iri><[^<>"{}|^`\\\s]*>)
    |(?P<inverse>\^(?:<[^<>"{}|^`\\\s]*>|[A-Za-z][\w.-]*:[\w-]*))
    |(?P<var>[?$][A-Za-z_]\w*)
    |(?P<number>[+-]?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?))
    |(?P<pname>[A-Za-z][\w.-]*:[\w-]*|:[\w-]+)
    |(?P<word>[A-Za-z_]\w*)
    |(?P<op>&&|\|\||!=|<=|>=|\^\^|[{}()\[\].;,=<>!+*/^|-])""",
    re.VERBOSE,
)
_OPS = {"=", "!=", "<", ">", "<=", ">="}
_TERM_KINDS = {"iri", "var", "pname", "string", "number"}


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Tok]:
    out: list[Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot tokenize at {pos}: {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            value = m.group()
            if kind == "word" and value.lower() in ("true", "false"):
                kind = "boolean"
            out.append(Tok(kind, value, m.start(), m.end()))
        pos = m.end()
    return out


# -- triples as the oracle reads them ----------------------------------------------------------


@dataclass(frozen=True)
class TripleRef:
    s: Tok
    p: Tok
    o: Tok
    stmt_start: int  # char offset of the statement's subject
    pair_start: int  # char offset of the predicate
    pair_end: int  # char offset after the object
    sep_before: Tok | None  # ';' before the predicate, if any
    sep_after: Tok | None  # ';' or '.' after the object, if any
    plain: bool  # not inside a sub-select, EXISTS, MINUS or SERVICE


@dataclass
class QueryShape:
    text: str
    prefixes: dict[str, str]
    tokens: list[Tok]
    triples: list[TripleRef] = field(default_factory=list)
    comparisons: list[tuple[Tok, str, Tok]] = field(default_factory=list)  # var, op, literal
    var_comparisons: list[tuple[Tok, Tok]] = field(default_factory=list)  # var, var
    values: dict[str, list[Tok]] = field(default_factory=dict)  # VALUES var -> its terms
    group_opens: list[int] = field(default_factory=list)  # '{' token indexes of group patterns
    groups: list[tuple[int, int, str]] = field(default_factory=list)  # '{', '}' indexes, why
    selects: list[int] = field(default_factory=list)  # SELECT token indexes
    where_open: int | None = None  # the outer WHERE '{' token index


def shape(text: str) -> QueryShape:
    toks = tokenize(text)
    prefixes: dict[str, str] = {}
    for i, t in enumerate(toks[:-2]):
        if t.kind == "word" and t.text.upper() == "PREFIX":
            prefixes[toks[i + 1].text.rstrip(":")] = toks[i + 2].text[1:-1]
    sh = QueryShape(text, prefixes, toks)
    _Reader(sh).run()
    return sh


class _Reader:
    """A forgiving reader of group patterns: enough to find triples, filters and groups."""

    def __init__(self, sh: QueryShape) -> None:
        self.sh = sh
        self.t = sh.tokens
        self.scope: list[str] = []

    def run(self) -> None:
        i = 0
        while i < len(self.t):
            tok = self.t[i]
            if tok.text == "{":
                if self.sh.where_open is None:
                    self.sh.where_open = i
                i = self.group(i, "where")
                continue
            if tok.kind == "word" and tok.text.upper() == "SELECT":
                self.sh.selects.append(i)
            i += 1

    def skip_balanced(self, i: int) -> int:
        """Index after the bracket group starting at i ('(' '[' or '{')."""
        opener = self.t[i].text
        closer = {"(": ")", "[": "]", "{": "}"}[opener]
        depth = 0
        while i < len(self.t):
            if self.t[i].text == opener:
                depth += 1
            elif self.t[i].text == closer:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i

    def group(self, i: int, why: str) -> int:
        self.sh.group_opens.append(i)
        self.scope.append(why)
        opened = i
        i += 1
        while i < len(self.t) and self.t[i].text != "}":
            tok = self.t[i]
            word = tok.text.upper() if tok.kind == "word" else ""
            if tok.text == "{":
                i = self.group(i, "group")
            elif word == "SELECT":
                self.sh.selects.append(i)
                while i < len(self.t) and self.t[i].text != "{":
                    i = self.skip_balanced(i) if self.t[i].text == "(" else i + 1
                i = self.group(i, "subselect")
            elif word in ("FILTER", "HAVING", "BIND"):
                i += 1
                if self.t[i].kind == "word" and self.t[i].text.upper() in ("NOT", "EXISTS"):
                    while self.t[i].text != "{":
                        i += 1
                    i = self.group(i, "exists")
                    continue
                if self.t[i].kind in ("word", "pname") and self.t[i + 1].text == "(":
                    i += 1
                end = self.skip_balanced(i)
                if word in ("FILTER", "HAVING"):
                    self.comparisons(i, end)
                i = end
            elif word in ("OPTIONAL", "UNION"):
                i += 1
            elif word in ("MINUS", "SERVICE", "GRAPH"):
                i += 1
                while self.t[i].text != "{":
                    i += 1
                i = self.group(i, word.lower())
            elif word == "VALUES":
                i = self.values(i + 1)
            elif word in ("GROUP", "ORDER", "LIMIT", "OFFSET"):
                while self.t[i].text != "}":
                    i = self.skip_balanced(i) if self.t[i].text == "(" else i + 1
            elif tok.kind in _TERM_KINDS or tok.text == "[":
                i = self.statement(i)
            else:
                i += 1
        self.scope.pop()
        self.sh.groups.append((opened, i, why))
        return i + 1

    def values(self, i: int) -> int:
        """Record the terms each VALUES variable takes; return the index after the block."""
        names: list[str] = []
        while self.t[i].text != "{":
            if self.t[i].kind == "var":
                names.append(self.t[i].text)
            i += 1
        end = self.skip_balanced(i)
        column = 0
        for tok in self.t[i + 1 : end - 1]:
            if tok.text in ("(", ")"):
                column = 0
                continue
            if names:
                self.sh.values.setdefault(names[column % len(names)], []).append(tok)
                column += 1
        return end

    def statement(self, i: int) -> int:
        """subject predicate object (, object)* (; predicate object ...)* '.'?"""
        subject = self.t[i]
        if subject.text == "[":
            return self._skip_statement(self.skip_balanced(i))
        stmt_start = subject.start
        plain = not any(s in ("subselect", "exists", "minus", "service") for s in self.scope)
        i += 1
        sep_before: Tok | None = None
        while i < len(self.t):
            pred = self.t[i]
            kinds = ("iri", "pname", "var", "word", "inverse")
            if pred.kind not in kinds or self.t[i + 1].text in "/|^*+?":
                return self._skip_statement(i)
            i += 1
            while True:
                obj = self.t[i]
                if obj.kind not in _TERM_KINDS and obj.kind != "boolean":
                    return self._skip_statement(i)
                after = self.t[i + 1]
                sep_after = after if after.text in (";", ".") else None
                if pred.kind == "inverse":  # s ^p o is o p s
                    plain_pred = Tok("iri" if pred.text[1] == "<" else "pname", pred.text[1:],
                                     pred.start + 1, pred.end)  # fmt: skip
                    self.sh.triples.append(TripleRef(
                        obj, plain_pred, subject, stmt_start, pred.start, obj.end, sep_before,
                        sep_after, plain))  # fmt: skip
                    i += 1
                    if self.t[i].text == ",":
                        i += 1
                        continue
                    break
                self.sh.triples.append(TripleRef(
                    subject, pred, obj, stmt_start, pred.start, obj.end, sep_before, sep_after,
                    plain))  # fmt: skip
                i += 1
                if self.t[i].text == ",":
                    i += 1
                    continue
                break
            if self.t[i].text == ";":
                sep_before = self.t[i]
                i += 1
                if self.t[i].text in (".", "}"):
                    break
                continue
            break
        return i + 1 if self.t[i].text == "." else i

    def _skip_statement(self, i: int) -> int:
        while i < len(self.t) and self.t[i].text not in (".", "}"):
            i = self.skip_balanced(i) if self.t[i].text in "([{" else i + 1
        return i + 1 if i < len(self.t) and self.t[i].text == "." else i

    def comparisons(self, start: int, end: int) -> None:
        t = self.t
        for k in range(start, end - 2):
            a, op, b = t[k], t[k + 1], t[k + 2]
            # MIN/MAX/SAMPLE(?v) op literal (HAVING) compares ?v's own datatype
            if (
                a.text == ")"
                and op.text in _OPS
                and b.kind in ("string", "number", "boolean")
                and t[k - 2].kind == "var"
                and t[k - 3].text == "("
                and t[k - 4].text.upper() in ("MIN", "MAX", "SAMPLE")
            ):
                self.sh.comparisons.append((t[k - 2], op.text, b))
            elif op.text in _OPS and a.kind == "var" and b.kind == "var":
                self.sh.var_comparisons.append((a, b))
                self.sh.var_comparisons.append((b, a))
            elif op.text in _OPS and a.kind == "var" and b.kind in ("string", "number", "boolean"):
                if t[k - 1].text not in ("*", "/", "+", "-") and t[k + 3].text not in "*/+-":
                    self.sh.comparisons.append((a, op.text, b))
            elif op.text in _OPS and b.kind == "var" and a.kind in ("string", "number", "boolean"):
                if t[k - 1].text not in ("*", "/", "+", "-"):
                    self.sh.comparisons.append((b, op.text, a))
            elif (
                a.kind == "var" and op.kind == "word" and op.text.upper() == "IN" and b.text == "("
            ):
                j = k + 3
                while t[j].text != ")":
                    if t[j].kind in ("string", "number", "boolean"):
                        self.sh.comparisons.append((a, "IN", t[j]))
                    j += 1


# -- the oracle: types from the ontology, read from the shape ----------------------------------


def expand(sh: QueryShape, tok: Tok) -> str | None:
    """Full IRI of an IRI or prefixed-name token ('a' is rdf:type); None for anything else."""
    if tok.kind == "iri":
        return tok.text[1:-1]
    if tok.kind == "pname":
        prefix, _, local = tok.text.partition(":")
        ns = sh.prefixes.get(prefix)
        return ns + local if ns is not None else None
    if tok.kind == "word" and tok.text == "a":
        return RDF_TYPE
    return None


def literal_family(tok: Tok) -> str | None:
    if tok.kind == "number":
        return "numeric"
    if tok.kind == "boolean":
        return "boolean"
    if tok.kind != "string":
        return None
    if "^^" not in tok.text:
        return "string"
    dt = tok.text.split("^^", 1)[1]
    local = dt.removeprefix("xsd:").strip("<>").removeprefix(XSD_NS)
    return _family_of_xsd(local)


def _family_of_xsd(local: str) -> str | None:
    if local in ("integer", "int", "long", "decimal", "double", "float", "short"):
        return "numeric"
    if local in ("dateTime", "dateTimeStamp"):
        return "dateTime"
    if local == "string":
        return "string"
    if local == "boolean":
        return "boolean"
    if local == "date":
        return "date"
    return None


def is_integer_literal(tok: Tok) -> bool:
    return tok.kind == "number" and re.fullmatch(r"[+-]?\d+", tok.text) is not None


class Oracle:
    """Answers "would this query break the ontology?" for one mutated triple or literal."""

    def __init__(self, model: OntologyModel) -> None:
        self.m = model

    def prop(self, iri: str | None) -> OntProperty | None:
        if iri is None or not iri.startswith(ONTOLOGY_NS):
            return None
        return self.m.find_property(iri)

    def classes_of(self, sh: QueryShape, term: Tok, skip: TripleRef | None) -> list[frozenset[str]]:
        out: list[frozenset[str]] = []
        iri = expand(sh, term) if term.kind in ("iri", "pname") else None
        if iri is not None and (cls := self.instance_class(iri)) is not None:
            out.append(frozenset({cls}))
        rows = sh.values.get(term.text, [])
        row_classes = {self.instance_class(expand(sh, r) or "") for r in rows}
        if rows and None not in row_classes:
            out.append(frozenset(c for c in row_classes if c))
        for t in sh.triples:
            if t is skip:
                continue
            p = expand(sh, t.p)
            if t.s.text == term.text:
                if p == RDF_TYPE:
                    cls = expand(sh, t.o)
                    if cls and self.m.find_class(cls):
                        out.append(frozenset({cls}))
                elif (pr := self.prop(p)) is not None:
                    out.append(pr.domain)
            if t.o.text == term.text and (pr := self.prop(p)) is not None and pr.kind == "object":
                out.append(pr.range)
        return out

    @staticmethod
    def instance_class(iri: str) -> str | None:
        if not iri.startswith(INSTANCE_NS):
            return None
        kind = iri[len(INSTANCE_NS) :].split("/", maxsplit=1)[0]
        entry = INSTANCE_KINDS.get(kind)
        return ONTOLOGY_NS + entry.cls if entry is not None else None

    def uses(
        self, sh: QueryShape, var: Tok, skip: TripleRef | None, filters: bool = True
    ) -> tuple[bool, set[str]]:
        """(used as a resource elsewhere, literal families it has elsewhere)."""
        resource = False
        families: set[str] = set()
        for t in sh.triples:
            if t is skip:
                continue
            p = expand(sh, t.p)
            if t.s.text == var.text:
                resource = True
            if t.o.text == var.text:
                pr = self.prop(p)
                if pr is not None and pr.kind == "object":
                    resource = True
                elif pr is not None and pr.datatype is not None:
                    fam = _family_of_xsd(pr.datatype.removeprefix(XSD_NS))
                    if fam:
                        families.add(fam)
                elif p and p.endswith(("#label", "#comment")):
                    families.add("string")
        for tok in sh.values.get(var.text, []):  # VALUES rows are bindings, not filters
            if tok.kind in ("iri", "pname"):
                resource = True
            elif (fam := literal_family(tok)) is not None:
                families.add(fam)
        if not filters:
            return resource, families
        for v, _, lit in sh.comparisons:
            if v.text == var.text and (fam := literal_family(lit)) is not None:
                families.add(fam)
        for a, b in sh.var_comparisons:
            if a.text == var.text and b.text != var.text:
                other_resource, other = self.uses(sh, b, skip, filters=False)
                families |= other | ({"resource"} if other_resource else set())
        return resource, families

    def fits(self, classes: frozenset[str], context: list[frozenset[str]]) -> bool:
        return all(not self.m.disjoint(classes, c) for c in context)

    def query_ok(self, sh: QueryShape) -> bool:
        """Every triple fits the ontology among all the others (conflicts are pairwise)."""
        for t in sh.triples:
            p = expand(sh, t.p)
            prop = self.prop(p)
            if prop is not None and not self.triple_ok(sh, t.s, prop, t.o, t):
                return False
            cls = expand(sh, t.o) if p == RDF_TYPE else None
            known = bool(cls) and self.m.find_class(cls or "") is not None
            if known and not self.fits(frozenset({cls or ""}), self.classes_of(sh, t.s, t)):
                return False
        return True

    def triple_ok(self, sh: QueryShape, s: Tok, prop: OntProperty, o: Tok, skip: TripleRef) -> bool:
        """Would ``s prop o`` be ontology-valid among the query's other triples?"""
        if s.kind in ("string", "number", "boolean"):
            return False
        if not self.fits(prop.domain, self.classes_of(sh, s, skip)):
            return False
        if prop.kind == "object":
            if o.kind in ("string", "number", "boolean"):
                return False
            if o.kind == "var":
                resource, families = self.uses(sh, o, skip)
                if families:
                    return False
            return self.fits(prop.range, self.classes_of(sh, o, skip))
        assert prop.datatype is not None
        want = _family_of_xsd(prop.datatype.removeprefix(XSD_NS))
        if o.kind in ("iri", "pname"):
            return False
        if o.kind == "var":
            resource, families = self.uses(sh, o, skip)
            return not resource and families <= {want}
        return self.literal_ok(o, prop.datatype)

    def literal_ok(self, lit: Tok, datatype: str) -> bool:
        want = _family_of_xsd(datatype.removeprefix(XSD_NS))
        if literal_family(lit) != want:
            return False
        integer_range = datatype.removeprefix(XSD_NS) in ("integer", "int", "long", "short")
        return not (integer_range and lit.kind == "number" and not is_integer_literal(lit))


# -- edits -------------------------------------------------------------------------------------


def apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _typo(rng: random.Random, name: str) -> str:
    ops: list[Callable[[str], str]] = [
        lambda s: s[:-1],
        lambda s: s + "s",
        lambda s: s[0].upper() + s[1:] if s[0].islower() else s[0].lower() + s[1:],
        lambda s: s.replace("_", "") if "_" in s else s[:1] + s[2:],
        lambda s: s[: len(s) // 2] + s[len(s) // 2 + 1 :],
    ]
    return rng.choice(ops)(name)


def _qname(iri: str) -> str:
    return "oda:" + iri.removeprefix(ONTOLOGY_NS)


Operator = Callable[[QueryShape, random.Random, Oracle, int], "tuple[str, bool, str] | None"]


def wrong_predicate(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    cands = [t for t in sh.triples if oracle.prop(expand(sh, t.p)) is not None]
    if not cands:
        return None
    t = rng.choice(cands)
    old = expand(sh, t.p) or ""
    if k % 4 == 0:  # a near-miss name that does not exist
        name = _typo(rng, old.removeprefix(ONTOLOGY_NS))
        if oracle.m.find_property(ONTOLOGY_NS + name) is not None:
            return None
        return apply(sh.text, [(t.p.start, t.p.end, f"<{ONTOLOGY_NS}{name}>")]), True, name
    new = rng.choice([p for p in oracle.m.properties.values() if p.iri != old])
    ok = oracle.triple_ok(sh, t.s, new, t.o, t)
    text = apply(sh.text, [(t.p.start, t.p.end, f"<{new.iri}>")])
    return text, not ok, f"{_qname(old)} -> {_qname(new.iri)}"


def wrong_class(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    typed = [t for t in sh.triples if expand(sh, t.p) == RDF_TYPE and t.o.kind in ("pname", "iri")]
    classes = sorted(oracle.m.classes.values(), key=lambda c: c.iri)
    if typed and k % 2 == 0:
        t = rng.choice(typed)
        if k % 6 == 0:
            name = _typo(rng, (expand(sh, t.o) or "").removeprefix(ONTOLOGY_NS))
            if oracle.m.find_class(ONTOLOGY_NS + name) is not None:
                return None
            return apply(sh.text, [(t.o.start, t.o.end, f"<{ONTOLOGY_NS}{name}>")]), True, name
        new = rng.choice(classes).iri
        ok = oracle.fits(frozenset({new}), oracle.classes_of(sh, t.s, t))
        return apply(sh.text, [(t.o.start, t.o.end, f"<{new}>")]), not ok, _qname(new)
    # add an rdf:type to a variable of a plain group
    plain_vars = sorted(
        {
            x.text
            for t in sh.triples
            if t.plain
            for x in (t.s, t.o)
            if x.kind == "var" and not oracle.uses(sh, x, None)[1]
        }
    )
    if not plain_vars or sh.where_open is None:
        return None
    var = rng.choice(plain_vars)
    new = rng.choice(classes).iri
    term = Tok("var", var, 0, 0)
    ok = oracle.fits(frozenset({new}), oracle.classes_of(sh, term, None))
    at = sh.tokens[sh.where_open].end
    return apply(sh.text, [(at, at, f"\n  {var} a <{new}> .")]), not ok, f"{var} a {_qname(new)}"


_SWAP_FORMS = [
    (1, "place"), (1, "inverse"), (2, "place"), (1, "start"), (3, "place"), (1, "after"),
    (2, "inverse"), (2, "start"), (2, "after"), (3, "start"), (3, "inverse"),
]  # fmt: skip


def swapped_triple(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    cands = [
        t for t in sh.triples
        if (p := oracle.prop(expand(sh, t.p))) is not None and p.kind == "object"
        and t.o.kind in ("var", "iri", "pname") and t.s.text != t.o.text
    ]  # fmt: skip
    if not cands:
        return None
    # Variants: how many triples (1-3), and where the swapped triple goes: in place, at the
    # start of WHERE, after its statement, or written as an inverse path (s ^p o is o p s).
    form = k % len(_SWAP_FORMS)
    count, placement = _SWAP_FORMS[form]
    inverse = placement == "inverse"
    picked = [rng.choice(cands)]
    for _ in range(count - 1):
        taken = set() if inverse else {x.stmt_start for x in picked}
        others = [c for c in cands if c not in picked and c.stmt_start not in taken]
        if not others:
            return None
        picked.append(rng.choice(others))
    edits: list[tuple[int, int, str]] = []
    for t in picked:
        if inverse:
            edits.append((t.p.start, t.p.start, "^"))
            continue
        removal = _remove_pair(sh, t)
        if removal is None or sh.where_open is None:
            return None
        swapped = f"{t.o.text} {t.p.text} {t.s.text} ."
        if placement == "start":
            at, new = sh.tokens[sh.where_open].end, f"\n  {swapped}"
        elif placement == "after":
            at, new = _statement_end(sh, t.stmt_start), f"\n  {swapped}"
        else:
            at, new = t.stmt_start, f"{swapped}\n  "
        edits += [removal, (at, at, new)]
    text = apply(sh.text, edits)
    note = "; ".join(f"swap {t.s.text} {t.p.text} {t.o.text}" for t in picked)
    return text, not oracle.query_ok(shape(text)), f"{note} (form {form})"


def _remove_pair(sh: QueryShape, t: TripleRef) -> tuple[int, int, str] | None:
    """Delete one predicate-object pair from its statement, keeping the rest well-formed."""
    siblings = [x for x in sh.triples if x.stmt_start == t.stmt_start]
    if len(siblings) == 1:  # the whole statement
        end = t.sep_after.end if t.sep_after is not None and t.sep_after.text == "." else t.pair_end
        return t.stmt_start, end, ""
    if t.sep_after is not None and t.sep_after.text == ";":
        return t.pair_start, t.sep_after.end, ""
    if t.sep_before is None:  # an object list (a , b): not worth the bookkeeping
        return None
    return t.sep_before.start, t.pair_end, ""


_WRONG_LITERALS = {
    "numeric": [
        '"abc"', '"2022-06-01T00:00:00Z"^^xsd:dateTime', '"42"', "true", '"650.0"^^xsd:string',
        '"2022-06-01"^^xsd:date', '"high"@en', "false",
    ],
    "dateTime": [
        '"2022-06-01"', "20220601", '"2022-06-01T00:00:00Z"', '"2022-06-01"^^xsd:date',
        '"2022-06-01T00:00:00Z"^^xsd:string', "1654041600.0", "true", '"yesterday"',
    ],
    "string": [
        "42", '"2022-06-01T00:00:00Z"^^xsd:dateTime', "3.5", "false", '"2022-06-01"^^xsd:date',
        "1.0e3",
    ],
    "boolean": ['"yes"', "1", '"true"'],
}  # fmt: skip


def wrong_datatype(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    sites: list[tuple[Tok, str]] = []  # literal token, family the context expects
    for t in sh.triples:
        prop = oracle.prop(expand(sh, t.p))
        if prop is not None and prop.datatype and t.o.kind in ("string", "number", "boolean"):
            fam = _family_of_xsd(prop.datatype.removeprefix(XSD_NS))
            if fam:
                sites.append((t.o, fam))
    for var, _, lit in sh.comparisons:
        # only variables whose datatype a data property fixes (not a BIND or VALUES)
        resource, fams = oracle.uses(sh, var, None, filters=False)
        if len(fams) == 1 and not resource:
            sites.append((lit, fams.pop()))
    # a new FILTER comparing the value of a data property with a literal, after its statement
    values: list[tuple[TripleRef, str]] = []
    for t in sh.triples:
        prop = oracle.prop(expand(sh, t.p))
        if prop is not None and prop.datatype and t.o.kind == "var" and t.sep_after is not None:
            resource, fams = oracle.uses(sh, t.o, None, filters=False)
            if len(fams) == 1 and not resource and t.sep_after.text == ".":
                values.append((t, fams.pop()))
    if not sites and not values:
        return None
    if values and (not sites or k % 2):
        t, fam = rng.choice(values)
        new = rng.choice(_WRONG_LITERALS.get(fam, ['"abc"']))
        op = rng.choice(["=", "<", ">=", "!="])
        assert t.sep_after is not None
        at = t.sep_after.end
        text = apply(sh.text, [(at, at, f" FILTER({t.o.text} {op} {new})")])
        lit = Tok("var", t.o.text, 0, 0)
    else:
        lit, fam = rng.choice(sites)
        new = rng.choice(_WRONG_LITERALS.get(fam, ['"abc"']))
        text = apply(sh.text, [(lit.start, lit.end, new)])
    if "xsd:" in new and "xsd" not in sh.prefixes:
        text = f"PREFIX xsd: <{XSD_NS}>\n" + text
    new_family = literal_family(tokenize(new)[0])
    return text, new_family != fam, f"{lit.text} -> {new} (expects {fam})"


def unbound_projection(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    if not sh.selects:
        return None
    at = sh.tokens[rng.choice(sh.selects)]
    after = at.end
    nxt = sh.tokens[sh.tokens.index(at) + 1]
    if nxt.kind == "word" and nxt.text.upper() in ("DISTINCT", "REDUCED"):
        after = nxt.end
    fresh = f"?unbound_{k}"
    forms = [f" {fresh}", f" (STR({fresh}) AS ?label_{k})", f" (MAX({fresh}) AS ?max_{k})"]
    if nxt.text == "*":
        return None
    return apply(sh.text, [(after, after, rng.choice(forms))]), True, fresh


# -- grouping: the oracle reads each SELECT level's clauses from the tokens -----------------------

_AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "SAMPLE", "GROUP_CONCAT"}
_CLAUSES = {"GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "VALUES"}


@dataclass(frozen=True)
class Level:
    """One SELECT (the query or a sub-select) as token index ranges, end exclusive."""

    select: int
    projection: tuple[int, int]
    where: tuple[int, int]  # '{' .. '}' inclusive start, exclusive end
    clauses: dict[str, tuple[int, int]]  # GROUP / HAVING / ORDER / ... -> its token range
    end: int  # after the solution modifiers


def _skip(toks: list[Tok], i: int) -> int:
    """Index after the bracket group opening at i, or i + 1 for any other token."""
    opener = toks[i].text
    closer = {"(": ")", "[": "]", "{": "}"}.get(opener)
    if closer is None:
        return i + 1
    depth = 0
    while i < len(toks):
        depth += (toks[i].text == opener) - (toks[i].text == closer)
        i += 1
        if depth == 0:
            return i
    return i


def levels(sh: QueryShape) -> list[Level]:
    toks = sh.tokens
    out = []
    for s in sh.selects:
        i = s + 1
        while (
            i < len(toks) and toks[i].text != "{" and toks[i].text.upper() not in ("FROM", "WHERE")
        ):
            i = _skip(toks, i)
        projection = (s + 1, i)
        while i < len(toks) and toks[i].text != "{":
            i += 1
        if i >= len(toks):
            continue
        where = (i, _skip(toks, i))
        clauses: dict[str, tuple[int, int]] = {}
        j, current = where[1], ""
        while j < len(toks) and toks[j].text != "}":
            word = toks[j].text.upper() if toks[j].kind == "word" else ""
            if word in _CLAUSES:
                if current:
                    clauses[current] = (clauses[current][0], j)
                current = word
                clauses[word] = (j, j)
            j = _skip(toks, j)
        if current:
            clauses[current] = (clauses[current][0], j)
        out.append(Level(s, projection, where, clauses, j))
    return out


def _reads(toks: list[Tok], start: int, end: int) -> list[str]:
    """Variables read outside aggregates and EXISTS (an ``AS ?alias`` is not read)."""
    out: list[str] = []
    i = start
    while i < end:
        t = toks[i]
        word = t.text.upper() if t.kind == "word" else ""
        if word in _AGGREGATES and i + 1 < end and toks[i + 1].text == "(":
            i = _skip(toks, i + 1)
        elif word == "EXISTS":
            while i < end and toks[i].text != "{":
                i += 1
            i = _skip(toks, i)
        elif word == "AS":
            i += 2
        else:
            if t.kind == "var":
                out.append(t.text)
            i += 1
    return out


def _has_aggregate_tok(toks: list[Tok], start: int, end: int) -> bool:
    return any(
        toks[i].kind == "word" and toks[i].text.upper() in _AGGREGATES and toks[i + 1].text == "("
        for i in range(start, min(end, len(toks) - 1))
    )


@dataclass(frozen=True)
class _Item:
    var: str  # the projected variable or the expression's alias
    reads: tuple[str, ...]
    start: int
    end: int
    expression: bool


def _items(toks: list[Tok], level: Level) -> list[_Item]:
    out = []
    i, end = level.projection
    while i < end:
        t = toks[i]
        if t.kind == "var":
            out.append(_Item(t.text, (t.text,), i, i + 1, False))
        elif t.text == "(":
            close = _skip(toks, i)
            alias = next((toks[k + 1].text for k in range(i, close - 1)
                          if toks[k].text.upper() == "AS"), "")  # fmt: skip
            out.append(_Item(alias, tuple(_reads(toks, i + 1, close - 1)), i, close, True))
            i = close
            continue
        i += 1
    return out


def _keys(toks: list[Tok], level: Level) -> tuple[list[tuple[str, int, int]], set[str]]:
    """GROUP BY keys as (variable, first token, end token), and the keys as a set."""
    span = level.clauses.get("GROUP")
    if span is None:
        return [], set()
    out = []
    i = span[0] + 2  # GROUP BY
    while i < span[1]:
        t = toks[i]
        if t.kind == "var":
            out.append((t.text, i, i + 1))
            i += 1
            continue
        close = _skip(toks, i + 1 if toks[i].kind in ("word", "pname") else i)
        inner = [x for x in toks[i + 1 : close - 1]]
        if t.text == "(" and len(inner) >= 2 and inner[-2].text.upper() == "AS":
            out.append((inner[-1].text, i, close))
        elif t.text == "(" and len(inner) == 1 and inner[0].kind == "var":
            out.append((inner[0].text, i, close))
        i = close
    return out, {k for k, _, _ in out}


def _aggregated(toks: list[Tok], level: Level) -> bool:
    spans = [level.projection] + [
        level.clauses[c] for c in ("HAVING", "ORDER") if c in level.clauses
    ]
    return "GROUP" in level.clauses or any(_has_aggregate_tok(toks, a, b) for a, b in spans)


def grouping_ok(sh: QueryShape) -> bool:
    """SPARQL 1.1 §11.4: a grouping level reads only grouping keys outside aggregates."""
    toks = sh.tokens
    for level in levels(sh):
        if not _aggregated(toks, level):
            continue
        _, keys = _keys(toks, level)
        items = _items(toks, level)
        if any(toks[i].text == "*" for i in range(*level.projection)):
            return False
        aliases = {it.var for it in items if it.expression}
        if any(v not in keys for it in items for v in it.reads):
            return False
        if any(v not in keys for v in _reads(toks, *level.clauses.get("HAVING", (0, 0)))):
            return False
        order = _reads(toks, *level.clauses.get("ORDER", (0, 0)))
        if any(v not in keys and v not in aliases for v in order):
            return False
    return True


def _level_vars(sh: QueryShape, level: Level) -> list[str]:
    """Subject and object variables of the level's own triples (not of nested sub-selects)."""
    index = {t.start: i for i, t in enumerate(sh.tokens)}
    nested = [(a, b) for a, b, why in sh.groups
              if why in ("subselect", "exists", "minus", "service")
              and level.where[0] < a and b < level.where[1]]  # fmt: skip
    out: dict[str, None] = {}
    for t in sh.triples:
        for x in (t.s, t.o):
            k = index.get(x.start, -1)
            inside = level.where[0] < k < level.where[1]
            if x.kind == "var" and inside and not any(a < k < b for a, b in nested):
                out[x.text] = None
    return list(out)


def ungrouped_projection(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    """Break the grouping rule: drop a GROUP BY key, read an ungrouped variable in the
    projection, HAVING or ORDER BY, unwrap an aggregate, or group a query that did not."""
    toks = sh.tokens
    found = levels(sh)
    if not found:
        return None
    level = rng.choice(found)
    aggregated = _aggregated(toks, level)
    keys, key_set = _keys(toks, level)
    items = _items(toks, level)
    if any(toks[i].text == "*" for i in range(*level.projection)):
        return None
    candidates = [v for v in _level_vars(sh, level) if v not in key_set]
    form = k % 6 if aggregated else 5
    at_projection = toks[level.projection[0]].start
    if toks[level.projection[0]].text.upper() in ("DISTINCT", "REDUCED"):
        at_projection = toks[level.projection[0]].end
    edits: list[tuple[int, int, str]]
    if form == 0 and keys:  # drop a key (the whole clause if it is the only one)
        var, a, b = rng.choice(keys)
        if len(keys) == 1:
            a, b = level.clauses["GROUP"]
        edits, note = [(toks[a].start, toks[b - 1].end, "")], f"drop {var} from GROUP BY"
    elif form in (1, 2, 4) and candidates:
        var = rng.choice(candidates)
        if form == 1:
            edits, note = [(at_projection, at_projection, f" {var}")], f"project {var}"
        elif form == 2:
            alias = f"?{var[1:]}_text_{k}"
            edits = [(at_projection, at_projection, f" (STR({var}) AS {alias})")]
            note = f"project STR({var})"
        else:
            edits, note = _modifier_edit(toks, level, var, rng)
    elif form == 3:  # unwrap an aggregate of the projection
        calls = [
            i for i in range(*level.projection)
            if toks[i].kind == "word" and toks[i].text.upper() in _AGGREGATES
            and toks[i + 1].text == "(" and toks[i + 2].text != "*"
            and not any(t.text == ";" for t in toks[i : _skip(toks, i + 1)])
        ]  # fmt: skip
        if not calls:
            return None
        i = rng.choice(calls)
        close = _skip(toks, i + 1)
        first = i + 3 if toks[i + 2].text.upper() == "DISTINCT" else i + 2
        inner = sh.text[toks[first].start : toks[close - 2].end]
        edits, note = [(toks[i].start, toks[close - 1].end, f"({inner})")], f"unwrap {toks[i].text}"
    elif form == 5 and not aggregated:  # group by some of the projected variables, not all
        plain = [it.var for it in items if not it.expression]
        if not plain:
            return None
        left_out = rng.choice(plain)
        group = [v for v in plain if v != left_out] or [v for v in candidates if v != left_out][:1]
        if not group:
            return None
        at = toks[level.where[1] - 1].end
        edits, note = [(at, at, f"\nGROUP BY {' '.join(group)}")], f"GROUP BY without {left_out}"
    else:
        return None
    text = apply(sh.text, edits)
    return text, not grouping_ok(shape(text)), note


def _modifier_edit(
    toks: list[Tok], level: Level, var: str, rng: random.Random
) -> tuple[list[tuple[int, int, str]], str]:
    """Read ``var`` in ORDER BY or HAVING, adding the clause where it is missing."""
    if rng.random() < 0.5:
        clause, term = "ORDER", rng.choice([var, f"DESC({var})", f"ASC({var})", f"STR({var})"])
        stops = ("LIMIT", "OFFSET", "VALUES")
    else:
        clause = "HAVING"
        term = rng.choice([f"(BOUND({var}))", f"(!BOUND({var}))", f'(STR({var}) != "")'])
        stops = ("ORDER", "LIMIT", "OFFSET", "VALUES")
    name = "ORDER BY" if clause == "ORDER" else clause
    if clause in level.clauses:  # a condition first in the existing clause
        words = 2 if clause == "ORDER" else 1
        at = toks[level.clauses[clause][0] + words - 1].end
        return [(at, at, f" {term}")], f"{name} {term}"
    # a new clause: HAVING before ORDER BY, both before LIMIT, OFFSET and VALUES
    before = [level.clauses[c][0] for c in stops if c in level.clauses]
    at = toks[min(before)].start if before else toks[level.end - 1].end
    return [(at, at, f"\n{name} {term}\n")], f"{name} {term}"


def disconnected_pattern(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    opens = [
        i for i in sh.group_opens
        if i + 1 < len(sh.tokens) and sh.tokens[i + 1].text.upper() != "SELECT"
        and sh.tokens[i + 1].text != "{"
    ]  # fmt: skip
    if not opens:
        return None
    at = sh.tokens[rng.choice(opens)].end
    props = sorted(oracle.m.properties.values(), key=lambda p: p.iri)
    prop = rng.choice(props)
    a, b = f"?island_s{k}", f"?island_o{k}"
    variants = [f"{a} <{prop.iri}> {b} ."]
    classes = sorted(oracle.m.classes)
    variants.append(f"{a} a <{ONTOLOGY_NS}{rng.choice(classes)}> .")
    node = rng.randrange(0, 980)
    node_iri = f"{INSTANCE_NS}node/{node}"
    if node_iri not in sh.text:
        variants.append(f"{a} <{ONTOLOGY_NS}observes> <{node_iri}> .")
    triple = rng.choice(variants)
    return apply(sh.text, [(at, at, f"\n  {triple}")]), True, triple


_UPDATES = [
    "INSERT DATA {{ <{ns}node/1> <{oda}nodeId> 1 . }}",
    "DELETE WHERE {{ ?s <{oda}nodeId> ?o . }}",
    "DELETE {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o }}",
    "CLEAR ALL",
    "CLEAR GRAPH <{ns}graph/base>",
    "DROP GRAPH <{ns}graph/base>",
    "DROP ALL",
    "LOAD <http://evil.example/data.ttl>",
    "LOAD <http://evil.example/data.ttl> INTO GRAPH <{ns}graph/base>",
    "CREATE GRAPH <{ns}graph/evil>",
    "COPY DEFAULT TO <{ns}graph/evil>",
    "MOVE <{ns}graph/base> TO <{ns}graph/evil>",
    "ADD <{ns}graph/base> TO <{ns}graph/evil>",
    "INSERT {{ <{ns}node/1> <{oda}nodeId> 1 }} WHERE {{ ?s ?p ?o }}",
]
_OTHER_GRAPHS = [
    INSTANCE_NS + "graph/base",
    INSTANCE_NS + "graph/cache-meta",
    INSTANCE_NS + "graph/vkg/someone-else",
    "http://evil.example/graph",
]


def injection(
    sh: QueryShape, rng: random.Random, oracle: Oracle, k: int
) -> tuple[str, bool, str] | None:
    form = k % 6
    update = rng.choice(_UPDATES).format(ns=INSTANCE_NS, oda=ONTOLOGY_NS)
    prologue_end = _prologue_end(sh)
    if form == 0:  # the whole request replaced by an update, prefixes kept
        return sh.text[:prologue_end] + "\n" + update + "\n", True, update
    if form == 1:  # an update appended after the query
        return sh.text.rstrip() + " ;\n" + update + "\n", True, "; " + update
    if form == 2:  # an update prepended before the query
        return (
            sh.text[:prologue_end] + "\n" + update + " ;\n" + sh.text[prologue_end:],
            True,
            update,
        )
    stmts = sorted({t.stmt_start for t in sh.triples if t.plain})
    graph = rng.choice(_OTHER_GRAPHS)
    if form == 3 and stmts:  # SERVICE around one statement
        start = rng.choice(stmts)
        end = _statement_end(sh, start)
        svc = rng.choice(["http://evil.example/sparql", "https://query.wikidata.org/sparql"])
        edits = [(start, start, f"SERVICE <{svc}> {{ "), (end, end, " }")]
        return apply(sh.text, edits), True, f"SERVICE <{svc}>"
    if form == 4 and stmts:  # GRAPH around one statement
        start = rng.choice(stmts)
        end = _statement_end(sh, start)
        edits = [(start, start, f"GRAPH <{graph}> {{ "), (end, end, " }")]
        return apply(sh.text, edits), True, f"GRAPH <{graph}>"
    if sh.where_open is None:
        return None
    where = sh.tokens[sh.where_open]
    before = sh.tokens[sh.where_open - 1]
    at = before.start if before.kind == "word" and before.text.upper() == "WHERE" else where.start
    clause = rng.choice(["FROM", "FROM NAMED"])
    return apply(sh.text, [(at, at, f"{clause} <{graph}>\n")]), True, f"{clause} <{graph}>"


def _prologue_end(sh: QueryShape) -> int:
    end = 0
    for i, t in enumerate(sh.tokens):
        if t.kind == "word" and t.text.upper() in ("PREFIX", "BASE"):
            end = sh.tokens[i + 2 if t.text.upper() == "PREFIX" else i + 1].end
    return end


def _statement_end(sh: QueryShape, start: int) -> int:
    pairs = [t for t in sh.triples if t.stmt_start == start]
    last = max(pairs, key=lambda t: t.pair_end)
    return last.sep_after.end if last.sep_after is not None else last.pair_end


OPERATORS: dict[str, Operator] = {
    "wrong_predicate": wrong_predicate,
    "wrong_class": wrong_class,
    "swapped_triple": swapped_triple,
    "wrong_datatype": wrong_datatype,
    "unbound_projection": unbound_projection,
    "ungrouped_projection": ungrouped_projection,
    "disconnected_pattern": disconnected_pattern,
    "injection": injection,
}


def generate(
    golds: list[Gold], kind: str, n: int, model: OntologyModel, seed: int = 7
) -> list[Mutant]:
    """``n`` distinct mutants of one kind, spread round-robin over the gold queries."""
    rng = random.Random(f"{seed}:{kind}")
    oracle = Oracle(model)
    shapes = [(g, shape(g.sparql)) for g in golds]
    operator = OPERATORS[kind]
    seen: set[str] = set()
    out: list[Mutant] = []
    attempts = 0
    while len(out) < n and attempts < n * 60:
        g, sh = shapes[attempts % len(shapes)]
        # the round number picks the operator's variant, so every gold meets every variant
        made = operator(sh, rng, oracle, attempts // len(shapes))
        attempts += 1
        if made is None or made[0] in seen or made[0] == g.sparql:
            continue
        seen.add(made[0])
        out.append(Mutant(kind, g.id, made[0], made[1], made[2]))
    return out


def iter_all(golds: list[Gold], n: int, model: OntologyModel, seed: int = 7) -> Iterator[Mutant]:
    for kind in KINDS:
        yield from generate(golds, kind, n, model, seed)
