"""Rule-based entity extraction for Stage 1 (input validation) of the retriever.

``extract_entities(text)`` finds the fixed infrastructure entities a question names: node ids
(``node 900``, ``nodes 900 and 920``, ``nodes 10-19``, ``node900``, ``all nodes``), racks, the room,
the system (``M100``, ``the whole system``, ``system-level``, ``cluster``), job and user ids, GPU
indices, CPU sockets, the facility devices of the vertiv / schneider / logics plugins, and whether
the weather plugin is meant.

Rules the rest of the retriever relies on:

- An id is only read right after its keyword (``nodes``, ``jobs``, ``GPU``…), as a list with
  commas, ``and``/``or`` and ranges (``10-19``, ``10 to 19``). Temporal phrases are blanked first
  (``timeparse.time_spans``), so ``on 1 June 2022``, ``08:00`` or ``last 10 hours`` never become
  ids, and numbers without a keyword (``top-3``, ``the 10 days``) are never ids.
- ``system CPU`` is a metric (Ganglia ``cpu_system``), not the system entity; ``ambient
  temperature`` is the IPMI inlet sensor, not the weather plugin.
- GPU indices follow Ganglia (0..3). A range that runs past 3 (``GPU-0–4``) is cut to 0..3 with a
  warning; a lone ``GPU 4`` is left out with a warning (IPMI numbers the GPUs 0, 1, 3, 4, so it may
  mean Ganglia GPU 3); anything higher is an error.
- Impossible ids (``node 1200``, ``rack 60``, ``CPU 5``, ``CDZ12``) raise ``UsageError`` with the
  valid range as the hint; doubtful ones go to ``warnings`` for the caller to clarify or note.
- Every id tuple is sorted and unique; ``spans`` are the character spans consumed, merged and
  sorted, so metric grounding can remove entity text before embedding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import cast

from oda_analyst.errors import UsageError
from oda_analyst.lake import topology
from oda_analyst.reading.rules.timeparse import time_spans
from oda_analyst.reading.types import Entities

DEVICE_KINDS: tuple[str, ...] = ("crac", "plc", "panel")
_MAX_ID = 2**32 - 1  # job and user ids are anonymised u32
_MAX_EXPANDED = 10_000  # a range of more ids than this is a typo, not a question


def entities_from_dict(data: Mapping[str, object]) -> Entities:
    """Validate a JSON object (e.g. a model's output) against the same rules as the rules."""
    known = {f.name for f in fields(Entities)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"unknown entity field {unknown[0]!r}", hint=f"use {sorted(known)}")

    def ints(name: str) -> list[int]:
        raw = data.get(name) or []
        if not isinstance(raw, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw
        ):
            raise UsageError(f"entity field {name!r} must be a list of integers", hint="[900]")
        return cast(list[int], raw)

    checked = {
        name: _checked(name, [(v, v) for v in ints(name)], [], strict=True)
        for name in ("nodes", "racks", "jobs", "users", "gpus", "cpus")
    }
    devices = []
    for item in cast(list[object], data.get("devices") or []):
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise UsageError(f"device {item!r} is not a [kind, key] pair", hint='["crac","CDZ01"]')
        kind, key = str(item[0]), str(item[1])
        _check_device(kind, key)
        devices.append((kind, key))
    return Entities(
        all_nodes=bool(data.get("all_nodes", False)),
        rooms=tuple(str(r) for r in cast(list[object], data.get("rooms") or [])),
        system=bool(data.get("system", False)),
        devices=tuple(sorted(set(devices))),
        weather=bool(data.get("weather", False)),
        warnings=tuple(str(w) for w in cast(list[object], data.get("warnings") or [])),
        spans=tuple((int(a), int(b)) for a, b in cast(list[list[int]], data.get("spans") or [])),
        **{name: tuple(values) for name, values in checked.items()},
    )


# --- patterns -----------------------------------------------------------------------------------

# "node 900 and 5 racks": a number followed by a counted noun is a count, not an id
# … but right after its keyword a number is the id, whatever entity follows: 'rack 12 nodes' are
# rack 12's nodes, 'user 25000 jobs' that user's jobs (a unit or a span of time still counts)
_UNITS = (
    r"seconds?|minutes?|hours?|days?|weeks?|months?|years?|times|samples|readings"
    r"|[a-z]*bytes|[kmgt]i?b|w|kw|mw"
)
_COUNTED = rf"(?!\s*(?:racks?|nodes?|jobs?|users?|gpus?|cpus?|sockets?|cores?|{_UNITS})\b)"
_MEASURED = rf"(?!\s*(?:{_UNITS})\b)"
_SPAN = r"\d+(?:\s*(?:[-–—]|to|through|thru)\s*\d+)?"
_ITEM = _SPAN + _COUNTED
# 'node 190 vs 191', 'rack 40 vs 41 vs 42': the ids compared are one list
_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s*&\s*|\s+and\s+|\s+or\s+|\s+(?:vs\.?|versus)\s+)"
_LIST = rf"(?P<ids>{_SPAN}{_MEASURED}(?:{_SEP}{_ITEM})*)(?!\d|[:.]\d|\s*%)"
_ID_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(keyword + r"\s*[-#:=_]?\s*" + _LIST, re.IGNORECASE))
    for name, keyword in (
        # 'n233', as host names abbreviate nodes
        ("nodes", r"\b(?:(?:compute\s+)?nodes?(?:[\s_-]*ids?)?|n(?=\d{1,3}\b))"),
        ("racks", r"\bracks?(?:[\s_-]*ids?)?"),
        ("jobs", r"\bjobs?(?:[\s_-]*(?:ids?|numbers?|no\.?))?"),
        ("users", r"\b(?:users?(?:[\s_-]*ids?)?|uids?)"),
        ("gpus", r"\bgpus?(?:[\s_-]*(?:ids?|index|indices))?"),
        ("cpus", r"\b(?:cpus?|sockets?)(?:[\s_-]*(?:ids?|index))?"),
    )
)
_ITEM_RE = re.compile(r"(\d+)(?:\s*(?:[-–—]|to|through|thru)\s*(\d+))?", re.IGNORECASE)
_FLAGS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("all_nodes", r"\b(?:all|every)\s+(?:of\s+)?(?:the\s+)?(?:compute\s+)?nodes?\b"),
        ("all_racks", r"\b(?:all|every)\s+(?:of\s+)?(?:the\s+)?racks?\b"),
        # 'node 900's four gpus', 'its 4 GPUs': a node has four; a bare '4 gpus' may count
        ("all_gpus", r"\b(?:all|every|each)\s+(?:(?:four|4)\s+)?(?:of\s+)?(?:the\s+)?gpus?\b"
                     r"|(?:\b(?:the|its|their)|'s)\s+(?:four|4)\s+gpus\b"),
        ("system", r"\b(?:M100|Marconi[\s-]?100|cluster|supercomputer"
                   r"|(?:whole|entire|full)\s+(?:system|machine)|system[\s-]?(?:level|wide)"
                   r"|(?:the|this)\s+(?:system|machine)(?![\s_-]*(?:cpu|time|load|calls?|mode"
                   r"|memory|metrics?|room)\b))\b"),
        ("rooms", r"\b(?:(?:machine|computer|server)\s+)?room\b|\bdata\s*(?:cent(?:er|re)|hall)\b"),
        ("weather", r"\b(?:weather|meteo|outdoor|outside\s+(?:air\s+)?temperature"
                    r"|external\s+temperature"
                    # 'the hottest it got outside', 'how cold was it outside'
                    r"|it\s+(?:got|gets|was|is|went)\s+outside|(?<=\bwas\sit\s)outside)\b"),
    )
)  # fmt: skip
_CRAC = re.compile(r"\b(?:CDZ[\s_-]?|CRAC(?:\s+units?)?\s*[-#]?\s*)(\d{1,2})\b", re.IGNORECASE)
_PLC = re.compile(r"\bQ(1\d\d)\b", re.IGNORECASE)
_QGBT = re.compile(
    r"\bQGBT[\s_-]?(\d{1,2})(?:(?:\s*[/:.]\s*|\s+|_)(main[_\s]ict|chiller|cdz|pumps|services))?\b",
    re.IGNORECASE,
)
_BOUNDS = {  # name -> (highest valid id, singular word, hint)
    "nodes": (topology.N_NODES - 1, "node", f"M100 nodes are 0..{topology.N_NODES - 1}"),
    "racks": (topology.N_RACKS - 1, "rack", f"M100 racks are 0..{topology.N_RACKS - 1}"),
    "jobs": (_MAX_ID, "job", "job ids are unsigned 32-bit integers"),
    "users": (_MAX_ID, "user", "user ids are unsigned 32-bit integers"),
    "gpus": (topology.GPUS_PER_NODE - 1, "GPU", "M100 nodes have GPUs 0..3 in Ganglia numbering"),
    "cpus": (topology.CPU_SOCKETS_PER_NODE - 1, "CPU socket", "M100 nodes have sockets 0 and 1"),
}


def _ranges(ids_text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b or a)) for a, b in _ITEM_RE.findall(ids_text)]


def _checked(
    name: str, ranges: Iterable[tuple[int, int]], warnings: list[str], *, strict: bool = False
) -> list[int]:
    """Expand id ranges, raising on impossible ids and warning on doubtful ones (unless strict)."""
    top, word, hint = _BOUNDS[name]
    values: set[int] = set()
    for first, last in ranges:
        lo, hi = min(first, last), max(first, last)
        if last < first:
            warnings.append(f"{word} range {first}-{last} runs backwards; read as {lo}-{hi}")
        if hi - lo >= _MAX_EXPANDED:
            raise UsageError(f"{word} range {lo}-{hi} is too large", hint="list fewer ids")
        if lo < 0:
            raise UsageError(f"{word} {lo} does not exist", hint=hint)
        if name == "gpus" and hi > top and not strict and (lo <= top or lo == hi == top + 1):
            # GPU-0–4: a typo or IPMI numbering (0, 1, 3, 4); keep the GPUs that exist and say so
            missing = ", ".join(str(g) for g in range(max(lo, top + 1), hi + 1))
            warnings.append(
                f"GPU {missing} does not exist: {hint}; IPMI calls the fourth GPU 'gpu4'"
                + (f"; using GPUs {lo}–{top}" if lo <= top else "")
            )
            if lo > top:
                continue
            hi = top
        if hi > top:
            raise UsageError(f"{word} {hi} does not exist", hint=hint)
        values.update(range(lo, hi + 1))
    return sorted(values)


def _check_device(kind: str, key: str) -> None:
    if kind == "crac" and key not in topology.VERTIV_DEVICES:
        raise UsageError(
            f"CRAC unit {key} does not exist",
            hint=f"units are {topology.VERTIV_DEVICES[0]}..{topology.VERTIV_DEVICES[-1]}",
        )
    if kind == "plc" and key not in topology.SCHNEIDER_PANELS:
        raise UsageError(
            f"cooling PLC panel {key} does not exist",
            hint=f"panels are {', '.join(topology.SCHNEIDER_PANELS)}",
        )
    if kind == "panel" and key not in {f"{p}/{d}" for p, d in topology.LOGICS_DEVICES}:
        raise UsageError(
            f"electrical panel device {key} does not exist",
            hint="devices are " + ", ".join(f"{p}/{d}" for p, d in topology.LOGICS_DEVICES),
        )
    if kind not in DEVICE_KINDS:
        raise UsageError(f"unknown device kind {kind!r}", hint=f"use one of {DEVICE_KINDS}")


def _devices(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for m in _CRAC.finditer(text):
        found.append(("crac", f"CDZ{int(m[1]):02d}"))
        spans.append(m.span())
    for m in _PLC.finditer(text):
        found.append(("plc", f"Q{m[1]}"))
        spans.append(m.span())
    for m in _QGBT.finditer(text):
        panel = f"QGBT{int(m[1])}"
        wanted = re.sub(r"\s", "_", m[2].lower()) if m[2] else None
        keys = [f"{p}/{d}" for p, d in topology.LOGICS_DEVICES if p == panel]
        if not keys:
            raise UsageError(
                f"electrical panel {panel} does not exist",
                hint="panels are " + ", ".join(sorted({p for p, _ in topology.LOGICS_DEVICES})),
            )
        found.extend(("panel", k) for k in ([f"{panel}/{wanted}"] if wanted else keys))
        spans.append(m.span())
    for kind, key in found:
        _check_device(kind, key)
    return sorted(set(found))


def _with_possessives(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """ "node 640's avg power", "node 650s avg": the possessive belongs to the entity (left out,
    its "s" is a word that names nothing)."""
    out = []
    for a, b in spans:
        if text[b : b + 2] in ("'s", "’s"):
            mark = 2
        elif text[b : b + 1] == "s" and text[b - 1 : b].isdigit():
            mark = 1  # 'node 650s'
        else:
            mark = 0
        owned = mark > 0 and not text[b + mark : b + mark + 1].isalnum()
        out.append((a, b + mark if owned else b))
    return out


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


# "the Leonardo system", "on the Galileo100 cluster": a named machine that is not M100. Its data
# is not in this lake, and answering with M100's would answer another question.
_NAMED_MACHINE = re.compile(
    r"\b(?i:on|of|in|for|at|from|across)\s+(?i:the\s+)?(?P<name>[A-Z][\w.-]*[A-Za-z0-9])\s+"
    r"(?i:system|cluster|supercomputer|machine|hpc\s+system)\b"
)
_THIS_MACHINE = frozenset(
    {"M100", "Marconi100", "Marconi-100", "GPU", "CPU", "HPC", "Slurm", "SLURM"}
)
# Well-known machines named without a "system"/"cluster" noun: "the PUE of Fugaku".
_KNOWN_MACHINE = re.compile(
    r"\b(?:on|of|in|for|at|from|across)\s+(?:the\s+)?(?P<name>Fugaku|Frontier|Aurora|Summit"
    r"|Sierra|El\s+Capitan|Leonardo|LUMI|Perlmutter|Galileo\s?100|Piz\s+Daint|Alps|JUWELS"
    r"|JUPITER|MareNostrum(?:\s?5)?|Sunway\s+TaihuLight|Tianhe(?:-\w+)?|Polaris|Selene"
    r"|Archer2?|Karolina|Discoverer|Deucalion|Vega|MeluXina)\b",
    re.IGNORECASE,
)


_BARE_JOB = re.compile(
    r"(?<!above\s)(?<!over\s)(?<!below\s)(?<!under\s)(?<!than\s)(?<!least\s)(?<!most\s)"
    rf"(?<![\w.,:/#<>=-])(?P<id>[1-9]\d{{6,9}})(?![\w.,:%/-])(?!\s*(?:{_UNITS})\b)",
    re.IGNORECASE,
)


def with_job_keyword(text: str) -> str:
    """'when did 10569684 kick off' read as 'when did job 10569684 kick off': a bare job id
    (``_BARE_JOB``) gets its keyword, so every rule after reads a named job."""
    if _KEYWORD_JOB.search(text):
        return text
    return _BARE_JOB.sub(lambda m: m.group(0).replace(m["id"], f"job {m['id']}"), text)


_KEYWORD_JOB = re.compile(r"\bjobs?\b", re.IGNORECASE)


def _other_machine(text: str) -> None:
    for m in [*_NAMED_MACHINE.finditer(text), *_KNOWN_MACHINE.finditer(text)]:
        if m["name"] not in _THIS_MACHINE:
            raise UsageError(
                f"the data here is M100's (CINECA Marconi100); there is no {m['name']!r} system "
                "in this lake",
                hint="ask about M100: its nodes, racks, jobs, users or facility equipment",
            )


def extract_entities(text: str) -> Entities:
    """Extract the entities of a question by rules (no model involved)."""
    _other_machine(text)
    masked = list(text)
    for start, end in time_spans(text):  # dates and clocks are never ids
        masked[start:end] = " " * (end - start)
    plain = "".join(masked)
    spans: list[tuple[int, int]] = []
    warnings: list[str] = []
    ids: dict[str, list[int]] = {}
    for name, pattern in _ID_PATTERNS:
        ranges: list[tuple[int, int]] = []
        for m in pattern.finditer(plain):
            ranges.extend(_ranges(m["ids"]))
            spans.append(m.span())
        ids[name] = _checked(name, ranges, warnings)
    flags: dict[str, bool] = {}
    for name, pattern in _FLAGS:
        hits = list(pattern.finditer(plain))
        flags[name] = bool(hits)
        spans.extend(m.span() for m in hits)
    if not ids["jobs"]:
        # 'when did 10569684 kick off': a bare number of seven digits or more is a job id (node,
        # rack and user ids are shorter), unless it is a level ('above 1500000 W')
        for m in _BARE_JOB.finditer(plain):
            if not any(a <= m.start() < b for a, b in spans) and int(m["id"]) <= _MAX_ID:
                ids["jobs"] = sorted({*ids["jobs"], int(m["id"])})
                spans.append(m.span("id"))
    if flags["all_racks"]:
        ids["racks"] = list(range(topology.N_RACKS))
    if flags["all_gpus"]:
        ids["gpus"] = list(range(topology.GPUS_PER_NODE))
    if flags["all_nodes"] and ids["nodes"]:
        warnings.append("both 'all nodes' and node ids are given; the ids narrow nothing")
    return Entities(
        nodes=tuple(ids["nodes"]),
        all_nodes=flags["all_nodes"],
        racks=tuple(ids["racks"]),
        rooms=(topology.ROOM,) if flags["rooms"] else (),
        system=flags["system"],
        jobs=tuple(ids["jobs"]),
        users=tuple(ids["users"]),
        gpus=tuple(ids["gpus"]),
        cpus=tuple(ids["cpus"]),
        devices=tuple(_devices(plain, spans)),
        weather=flags["weather"],
        warnings=tuple(warnings),
        spans=_merged(_with_possessives(text, spans)),
    )
