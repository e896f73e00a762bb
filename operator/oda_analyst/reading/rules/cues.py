"""Cue rules of the rule-based planner: what a question asks to *compute* (not about what).

``read_intent(text)`` reads aggregation, grouping, ranking, job-filter, job-window and plot cues
from a question whose temporal phrases (and grounded metric names) the planner has blanked.
All cues are case-insensitive regular expressions; the planner decides what each means for a
given target. The cues:

- **Aggregations**: average/mean/avg → avg; min/minimum → min; max/maximum/peak → max;
  total/sum → sum; count/number of/how many → count; std/standard deviation → std;
  coefficient of variation/CV → cv; median; p90/p95/p99/"95th percentile" (a bare "percentile"
  is p95, with a note). Lists such as "min/max/avg" give one aggregation each, in text order.
  Each takes a subject from the words after it: "number of jobs"/"job count" → count of job;
  "CPU and GPU hours" → cpu_hours and gpu_hours; "duration"/"runtime" → duration_h; "how many
  nodes" → node; anything else → the readings' value. "total power" is the IPMI metric
  total_power, never a sum; "total number of jobs" is a count.
- **highest/lowest** rank when the question ranks (a top-k, "which node", "the 3 hottest
  nodes"); otherwise they are max/min.
- **Grouping**: per/for each/by/every node ("comparing the nodes", "each of the nodes"), GPU,
  rack, job ("for each of user U's jobs"), user, metric; daily/each day/per day, hourly/per
  hour. "per minute" is a granularity, not a group. "compare"/"versus" is kept as a cue
  (``compare``): the planner splits compared GPUs or sockets per metric.
- **Ranking**: "top-3", "top 10 users", "the 5 longest", "which rack …" (k = 1), a singular
  "the longest job" (k = 1). Keys: longest/shortest → job duration; "by number of jobs"/"most
  jobs" → count of job; "by CPU hours" → sum of cpu_hours; "highest average X" → avg (desc);
  highest/hottest/largest → max (desc); lowest/coolest/smallest → min (asc). No key → ``key``
  None (the planner picks a default and says so).
- **Job filters**: single-node (num_nodes = 1), multi-node (> 1), "more than/at least N nodes",
  "N or more/N+ nodes", failed/crashed/completed/timed out (also "killed for exceeding their time
  limit")/cancelled/out of memory/node failure/preempted (job state; "with state FAILED" and
  Slurm's own "NODE_FAIL" included),
  "on partition X"/"the X partition"/an M100 partition name alone, GPU jobs (num_gpus > 0),
  CPU-only jobs (num_gpus = 0).
  "of user U" comes from the entity extractor (user ids).
- **Value filters**: above/over/exceeding/below/under/at least/at most N with a unit (°C, W, %),
  "N W or more/or less", "hitting/reached N °C" (at least N), "never went above N" (at most N,
  every reading); "at/exactly N %" is a level (equal to N).
- **Job-based window**: "over their (whole) duration", "during the job(s)", "while the job(s)
  was/were running", "while it ran", "while job ### was running".
- **Plots**: line plot/time series/over time/trend → line; box plot → box; histogram/
  distribution → histogram (companion plans depend on them).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from oda_analyst.ontology.catalogue import MetricInfo, load_catalogue, normalise_phrase
from oda_analyst.ontology.plan import AggFn, AggOf, CompareOp, GroupKey, JobFilter, ValueFilter
from oda_analyst.reading.model import RetrievalReading
from oda_analyst.reading.rules.jobattrs import JOB_STATE_NOUNS
from oda_analyst.reading.types import NO_LEVEL, Entities, Level, ParsedWindow

Subject = AggOf
RankKey = Literal["duration", "count_job", "cpu_hours", "gpu_hours", "value"]

_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twenty": 20, "fifty": 50, "hundred": 100,
}  # fmt: skip
_N = r"(\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten|twenty|fifty|hundred)"
_NOUN = r"(?<![\w-])(nodes?|racks?|users?|jobs?|gpus?)(?![\w-])"
_UP = r"highest|hottest|warmest|largest|biggest|heaviest|most|maximum|peak|busiest"
_DOWN = r"lowest|coolest|coldest|smallest|least|fewest|minimum"
_AGG_WORDS: tuple[tuple[AggFn, str], ...] = (
    ("cv", r"coefficients?\s+of\s+variation|\bcv\b"),
    ("std", r"standard\s+deviations?|\bstd(?:\s*dev)?\b|\bstdev\b|\bspread\b"),
    ("median", r"\bmedians?\b"),
    ("p95", r"\bp(?:50|90|95|99)\b|\b\d{1,2}(?:st|nd|rd|th)?[\s-]*percentiles?\b|\bpercentiles?\b"),
    ("avg", r"\baverage[ds]?\b|\bmeans?\b|\bavg\b"),
    # 'the hottest outdoor temperature in May' (nothing ranked) is the maximum
    # '(min)' after a wait is its unit, minutes
    ("min", r"(?<![\d#]\s)(?<![\d#])(?<!\()\bmin(?:imum|imal)?\b(?!\))|\blowest\b|\bsmallest\b"
            r"|\bcoldest\b|\bcoolest\b"),
    ("max", r"\bmax(?:imum|imal)?\b|\bpeak\b|\bhighest\b|\blargest\b|\bhottest\b|\bwarmest\b"),
    ("sum", r"\btotal\b|\bsum\b|\bsummed\b|\bcumulative\b"),
    ("count", r"\bhow\s+many\b|\bnumber\s+of\b|\bcount(?:s|ed)?\b|\bjob\s+counts?\b"),
)  # fmt: skip
AGG_WORD_RE = re.compile("|".join(f"(?P<{fn}>{rx})" for fn, rx in _AGG_WORDS), re.IGNORECASE)
_ANY_AGG = "|".join(rx for _, rx in _AGG_WORDS)
# what may sit between an aggregation word and its subject ("min/max/avg power", "number of the")
_LEAD = re.compile(
    rf"^(?:\s*(?:/|,|&|\band\b|\bor\b|\bof\b|\bthe\b|\ball\b)\s*|\s*(?:{_ANY_AGG}))*"
)
_HOURS = r"(?:cpu|gpu|core)s?(?:\s*(?:and|&|/|,|or)\s*(?:cpu|gpu|core)s?)*[\s-]*hours?\b"
_HOURS_RE = re.compile(_HOURS, re.IGNORECASE)
_DURATION = re.compile(
    r"^(?:jobs?'?\s+)?(?:durations?|run[\s-]?times?|elapsed\s+time|wall[\s-]?(?:clock\s+)?time|"
    r"lengths?)\b",
    re.IGNORECASE,
)
# 'run times', 'runtimes', 'wall time' anywhere: each job's duration is asked for
_DURATION_ANY = re.compile(
    r"\b(?:run[\s-]?times?|durations?|wall[\s-]?(?:clock[\s-]?)?times?|elapsed\s+times?)\b"
    r"(?![\s-]*limits?\b)",  # 'their wall-clock time limit' is the TIMEOUT state
    re.IGNORECASE,
)
# 'queue wait', 'waiting time', 'time in the queue': each job's start - submit time
_WAIT = (
    r"queu(?:e|ing)[\s-]*(?:wait(?:ing)?s?|times?|delays?)\b|wait(?:ing)?[\s-]*times?\b"
    r"|time\s+(?:spent\s+)?(?:in\s+(?:the\s+)?queue|waiting)\b|waited\b|waits\b"
    r"|queued\s+for\b"
)
_WAIT_RE = re.compile(rf"\b(?:{_WAIT})", re.IGNORECASE)
# 'each of the nodes', 'for each of user ###'s jobs': up to three words (ids masked as #) between
_EACH_OF = r"\beach\s+of\s+(?:[\w'#’]+\s+){0,3}?"
# 'for node 9 and for node 10 separately': the named entities one by one
_APART = (
    r"(?:[\s#,]|\band\b|\bfor\b|\bnodes?\b|\bracks?\b){1,40}?"
    r"(?:separately|individually|respectively)\b"
)
_EACH = r"\b(?:per|for\s+each|for\s+every|each|every|by|in\s+each|of\s+each)\s+"
_GROUPS: tuple[tuple[GroupKey, str], ...] = (
    ("node", r"\b(?:per|for\s+each|for\s+every|each|every|by)\s+(?:compute\s+)?node\b(?!\s*[\d#])"
             r"|\bper[\s-]node\b|\bnode[\s-]by[\s-]node\b|\bcompar\w*\s+(?:the\s+)?nodes\b"
             rf"|{_EACH_OF}nodes\b|\bnodes?\b{_APART}"),
    ("gpu", r"\b(?:per|for\s+each|for\s+every|each|every|by)\s+gpu\b(?!\s*[-#\d])|\bper[\s-]gpu\b"
            rf"|{_EACH_OF}gpus\b|\bgpus\b{_APART}|\bgpu[\s-]by[\s-]gpu\b"),
    ("rack", r"\b(?:per|for\s+each|for\s+every|each|every|by)\s+rack\b(?!\s*[\d#])"
             r"|\brack[\s-]by[\s-]rack\b|\bcompar\w*\s+(?:the\s+)?racks\b"
             rf"|\bracks?\b{_APART}"),
    ("job", r"\b(?:per|for\s+each|for\s+every|each|every|by)\s+job\b(?!\s*[\d#])"
            r"|\bjob[\s-]by[\s-]job\b|\bcompar\w*\s+(?:the\s+)?jobs\b"
            rf"|{_EACH_OF}jobs\b"),
    ("user", r"\b(?:per|for\s+each|for\s+every|each|every|by)\s+user\b(?!\s*[\d#])"
             r"|\btop\s+users\b"),
    ("metric", r"\b(?:per|for\s+each|for\s+every|each|by)\s+metric\b"),
    ("day", r"\b(?:daily|per[\s-]day|each\s+day|every\s+day|by\s+day|day[\s-]by[\s-]day)\b"),
    ("hour", r"\b(?:hourly|per[\s-]hour|each\s+hour|every\s+hour|by\s+hour"
             r"|hour[\s-]by[\s-]hour)\b"),
    # job attributes: 'in each partition', 'by final state', 'how the jobs … finished', 'per qos'
    ("partition", rf"{_EACH}(?:slurm\s+)?partitions?\b(?!\s*['\"]?[a-z0-9]*[_\d])"
                  r"|\bper[\s-]partition\b|\bpartition[\s-]by[\s-]partition\b"
                  r"|\bacross\s+(?:the\s+|all\s+)?partitions\b"
                  r"|\bbreak(?:down|\s+down|\s+it\s+down)\s+(?:by|per)\s+partition"),
    ("state", rf"{_EACH}(?:final\s+|end\s+|exit\s+|job\s+)?(?:states?|status(?:es)?|outcomes?)\b"
              r"|\bhow\s+(?!many\b|much\b|long\b|often\b)(?:[\w-]+\s+){0,3}?jobs?\b[^.?!;]{0,80}?"
              r"\b(?:finish(?:ed)?|end(?:ed)?(?:\s+up)?"
              r"|terminated|turned\s+out|fared?|went)\b"
              r"|\b(?:final|end|exit)\s+(?:job\s+)?states\b|\bstates?\s+breakdown\b"
              r"|\bbreak(?:down|\s+down)\s+(?:by|of|per)\s+(?:final\s+)?(?:states?|outcomes?)"),
    ("qos", rf"{_EACH}(?:qos|quality\s+of\s+service)\b|\bper[\s-]qos\b"),
)  # fmt: skip
_MINUTE = re.compile(r"\b(?:per[\s-]minute|each\s+minute|every\s+minute|minutely)\b", re.I)
_STATES: tuple[tuple[str, str], ...] = (
    ("NODE_FAIL", r"\bnode[\s_-]?fail(?:ed|ures?|s)?\b"),
    # 'killed for running out of memory': the kill is the state's, however it is worded
    (
        "OUT_OF_MEMORY",
        r"\b(?:(?:killed|terminated|stopped)\s+(?:for|after|when|because\s+of)\s+"
        r"(?:running\s+|going\s+|being\s+)?)?out[\s_-]of[\s_-]memory(?:\s+kills?)?\b"
        r"|\boom(?:[\s-]kill(?:s|ed)?)?\b",
    ),
    # 'had a job fail': the bare verb only right after 'job(s)'
    (
        "FAILED",
        r"\bfail(?:ed|ing|ures?)\b|\bcrash(?:ed|es)?\b|(?<=\bjob\s)fail\b|(?<=\bjobs\s)fail\b",
    ),
    ("COMPLETED", r"\bcompleted\b|\bsuccessful(?:ly)?\b|\bsucceeded\b"),
    (
        "TIMEOUT",
        r"\btimed[\s-]out\b|\btime[\s-]?outs?\b"
        # 'killed for exceeding their time limit', 'terminated by the wall-time limit': Slurm's
        # TIMEOUT, however the kill is worded (read before CANCELLED, which is then blanked)
        r"|\b(?:(?:killed|terminated|stopped|cancell?ed)\s+(?:for|after|on|when|because\s+of)\s+)?"
        r"(?:hit|hitting|reach(?:ed|ing)?|exceed(?:ed|ing)?|over(?:ran|running|run))\s+"
        r"(?:their|its|the)\s+(?:wall[\s-]?(?:clock[\s-]?)?)?time[\s-]?limits?\b"
        r"|\b(?:killed|terminated|stopped|cancell?ed)\s+(?:by|at|on)\s+(?:their|its|the)\s+"
        r"(?:wall[\s-]?(?:clock[\s-]?)?)?time[\s-]?limits?\b"
        r"|\b(?:(?:killed|terminated|stopped)\s+(?:for|after|when|because\s+of)\s+)?"
        r"(?:ran|running|run)\s+out\s+of\s+(?:wall[\s-]?(?:clock[\s-]?)?)?time\b",
    ),
    ("CANCELLED", r"\bcancell?ed\b"),
    ("PREEMPTED", r"\bpreempted\b"),
)
# 'on partition X', 'the X partition', or an M100 partition name alone ('m100_usr_prod jobs')
_PARTITION = re.compile(
    r"\bpartition\s+['\"]?([a-z0-9]*[_\d][\w.-]*)|\b([a-z0-9]+(?:_[a-z0-9]+)+)\s+partition\b"
    r"|\b(m100_[a-z]+_[a-z0-9]+)\b",
    re.I,
)
# 'the debug partition', 'prod queue': M100's partitions by their everyday names
PARTITION_ALIASES = {
    "debug": "m100_usr_dbg", "dbg": "m100_usr_dbg", "prod": "m100_usr_prod",
    "production": "m100_usr_prod", "serial": "m100_all_serial",
}  # fmt: skip
_PARTITION_ALIAS = re.compile(
    r"\b(?P<a>" + "|".join(PARTITION_ALIASES) + r")[\s-]+(?:partition|queue)\b"
    r"|\b(?:partition|queue)\s+['\"]?(?P<b>" + "|".join(PARTITION_ALIASES) + r")\b"
    # 'how many debug jobs', 'run times of prod jobs': the everyday name before 'jobs'
    r"|\b(?P<c>" + "|".join(PARTITION_ALIASES) + r")[\s-]+jobs?\b",
    re.I,
)
_JOB_WINDOW = re.compile(
    r"\b(?:over|during|for|throughout|across)\s+(?:their|its|the(?:\s+jobs?'?s?)?|each\s+job'?s)"
    r"\s+(?:whole\s+|entire\s+|full\s+|own\s+)?(?:durations?|run[\s-]?times?|executions?|"
    r"lifetimes?|runs?)\b|\bduring\s+(?:the|those|these|their|each)\s+jobs?\b"
    r"|\bwhile\s+(?:(?:the|that|this|each)\s+)?(?:jobs?(?:\s+#+)?|they|it)\s+"
    r"(?:(?:was|were|is|are)\s+)?(?:running|executing|ran|executed)\b",
    re.IGNORECASE,
)
_COMPARE = (
    r"above|over|exceed(?:s|ing|ed)?|greater\s+than|more\s+than|higher\s+than|hotter\s+than"
    r"|topp(?:ed|ing)|tops"
)
# a kW level on a metric in W is scaled where the metric is known (stage 1)
_UNIT = r"(?P<unit>°\s*c\b|degrees?(?:\s+c(?:elsius)?)?|c\b|kw\b|kilowatts?|w\b|watts?|%|percent)"
_VALUE_FILTER = re.compile(
    rf"(?P<op>{_COMPARE}|below|under|less\s+than|lower\s+than|cooler\s+than|at\s+least|at\s+most"
    r"|at\s+or\s+(?:below|under)|at\s+or\s+(?:above|over)"
    r"|(?<![<>=!-])[<>]=?(?=\s*\d))"
    rf"\s*(?P<v>-?\d+(?:\.\d+)?)\s*{_UNIT}",
    re.IGNORECASE,
)
# '280 W or more', '20 % or less': the comparison after the level
_OR_MORE = r"more|higher|above|greater|over|hotter"
_VALUE_POSTFIX = re.compile(
    rf"(?P<v>-?\d+(?:\.\d+)?)\s*{_UNIT}\s+or\s+"
    rf"(?P<op>{_OR_MORE}|less|lower|below|under|fewer|cooler)\b",
    re.IGNORECASE,
)
# 'nodes hitting 280 W', 'GPUs that reached 90 °C': the level was met, so at least it
_REACHING = re.compile(
    r"\b(?P<op>hit(?:s|ting)?|reach(?:es|ed|ing)?|touch(?:es|ed|ing)?)\s+"
    rf"(?P<v>-?\d+(?:\.\d+)?)\s*{_UNIT}(?!\s+or\s)",
    re.IGNORECASE,
)
# 'GPU 0 at 0 % utilisation', 'exactly 100 percent': a level stated as a value (percentages
# only: 'at 30 °C' could as well mean 'reaching')
_AT_LEVEL = re.compile(
    r"\b(?:at|exactly|equal\s+to)\s+(?P<v>\d+(?:\.\d+)?)\s*(?:%|percent\b)", re.IGNORECASE
)
_NODES_FILTER = re.compile(
    rf"(?P<op>more\s+than|over|at\s+least|fewer\s+than|less\s+than|at\s+most)\s+(?P<n>{_N})"
    r"\s+nodes\b",
    re.IGNORECASE,
)
# '8 or more nodes', '4+ nodes', '2 or fewer nodes'
_NODES_OR = re.compile(
    rf"(?P<n>{_N})\s*(?P<op>or\s+more|or\s+fewer|or\s+less|\+)\s+nodes\b", re.IGNORECASE
)
# 'jobs of 8 nodes or more'
_NODES_THEN_OR = re.compile(
    rf"(?P<n>{_N})\s+nodes\s+(?P<op>or\s+more|or\s+fewer|or\s+less)\b", re.IGNORECASE
)
_NODE_OR_OPS: dict[str, CompareOp] = {"or more": "ge", "+": "ge", "or fewer": "le", "or less": "le"}
_NODE_OPS: dict[str, CompareOp] = {
    "more than": "gt", "over": "gt", "at least": "ge", "fewer than": "lt", "less than": "lt",
    "at most": "le",
}  # fmt: skip
_PLOTS = (
    ("line", r"line[\s-]?(?:plot|chart|graph)|time[\s-]?series|over\s+time|timeline|\btrends?\b"),
    ("box", r"box[\s-]?(?:plot|chart)|boxplot|whiskers?"),
    ("histogram", r"histograms?|distributions?"),
)
_PER_ENTITY_CHARTS = frozenset({"bar", "pie"})
_COUNT_ENTITIES = re.compile(
    r"\b(?:how\s+many|number\s+of|count(?:\s+the|\s+all)?)\s+(?:compute\s+)?(nodes|racks|gpus)\b",
    re.IGNORECASE,
)
JOB_CUE_RE = re.compile(
    r"\bjobs?\b|\busers?\b|\blongest\b|\bshortest\b|\bjob\s+counts?\b|" + JOB_STATE_NOUNS,
    re.IGNORECASE,
)
_NO_SPLIT = re.compile(
    # 'each GPU across nodes 0-99': one figure per GPU over those nodes, not one per node
    r"\b(?:overall|combined|together|in\s+aggregate|pooled|as\s+a\s+whole"
    r"|across\s+(?:the\s+)?nodes)\b",
    re.IGNORECASE,
)
_COMPARE_CUE = re.compile(r"\bcompar(?:e|es|ed|ing|ison)\b|\bversus\b|\bvs\b", re.IGNORECASE)
# 'the power of each socket': one figure per CPU socket (per GPU is the 'gpu' group)
_PER_SOCKET = re.compile(
    r"\b(?:each|every|per|both)\s+(?:of\s+the\s+)?(?:cpu\s+)?(?:sockets?|cpus)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class AggCue:
    fn: AggFn
    of: Subject
    pos: int


@dataclass(frozen=True)
class RankCue:
    """A ranking: top ``k`` (None: order only) ``noun``s by ``key`` (None: not said)."""

    k: int | None
    noun: str | None  # node, rack, gpu, job, user
    key: RankKey | None
    fn: AggFn | None  # the value aggregate ranked by, when key == "value"
    desc: bool


@dataclass(frozen=True)
class Cues:
    aggs: tuple[AggCue, ...]
    groups: tuple[GroupKey, ...]
    minute: bool
    rank: RankCue | None
    job_filters: tuple[JobFilter, ...]
    value_filters: tuple[ValueFilter, ...]
    hours: tuple[Literal["cpu_hours", "gpu_hours"], ...]
    duration: bool  # job duration asked for (ranked, aggregated or named: 'run times')
    job_cue: bool  # jobs, users, longest/shortest (CPU/GPU hours alone are ``hours``)
    count_entities: str | None  # node, rack or gpu
    job_window: bool
    plots: frozenset[str]
    no_split: bool
    notes: tuple[str, ...]
    compare: bool = False  # "compare", "versus": the metrics named are set side by side
    per_socket: bool = False  # "each socket", "both CPUs"
    wait: bool = False  # "queue wait", "waiting time": each job's start - submit, in minutes


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _WORDS[word.lower()]


def _singular(noun: str) -> str:
    return noun.lower().removesuffix("s")


def _hours_of(phrase: str) -> list[Literal["cpu_hours", "gpu_hours"]]:
    out: list[Literal["cpu_hours", "gpu_hours"]] = []
    for word in re.findall(r"cpu|gpu|core", phrase.lower()):
        kind: Literal["cpu_hours", "gpu_hours"] = "gpu_hours" if word == "gpu" else "cpu_hours"
        if kind not in out:
            out.append(kind)
    return out


def _subjects(fn: AggFn, tail: str) -> list[Subject]:
    """What an aggregation word applies to, from the words right after it."""
    rest = _LEAD.sub("", tail, count=1).lstrip()
    hours = _HOURS_RE.match(rest)
    if hours:
        return list(_hours_of(hours.group()))
    if _DURATION.match(rest):
        return ["duration_h"]
    if re.match(rf"(?:jobs?'?\s+)?(?:the\s+)?(?:{_WAIT})", rest, re.I):
        return ["queue_wait_min"]
    # words before 'jobs' may be a possessive or a masked id ("user ###'s jobs")
    if fn in ("count", "sum") and re.match(r"(?:[\w'’#-]+\s+){0,3}?jobs?\b", rest, re.I):
        return ["job"]
    if fn == "count" and re.match(r"(?:compute\s+)?nodes\b", rest, re.I):
        return ["node"]
    return ["value"]


def _percentile(word: str, notes: list[str]) -> AggFn | None:
    digits = re.search(r"\d+", word)
    if digits is None:
        notes.append("'percentile' without a rank: the 95th percentile (p95) is used")
        return "p95"
    n = int(digits.group())
    fn = {50: "median", 90: "p90", 95: "p95", 99: "p99"}.get(n)
    if fn is None:
        notes.append(f"the {n}th percentile is not supported (p50, p90, p95, p99 are); dropped")
        return None
    return fn  # type: ignore[return-value]  # one of the AggFn literals above


def _aggregations(text: str, ranking: bool, notes: list[str]) -> list[AggCue]:
    out: list[AggCue] = []
    for m in AGG_WORD_RE.finditer(text):
        fn_name = m.lastgroup or ""
        word = m.group().lower()
        if ranking and re.fullmatch(rf"{_UP}|{_DOWN}", word):
            continue  # a ranking word; the rank supplies its aggregate
        after = text[m.end() : m.end() + 60]
        if fn_name == "sum" and re.match(r"\s+(?:node\s+)?power\b|\s+(?:number|count)\b", after):
            continue  # "total power" is the metric total_power; "total number of" is a count
        fn: AggFn | None = fn_name  # type: ignore[assignment]  # group names are AggFn values
        if fn_name == "p95":
            fn = _percentile(word, notes)
        if fn is None:
            continue
        subjects: list[Subject] = ["job"] if "job" in word else _subjects(fn, after)
        for subject in subjects:
            if fn == "sum" and subject == "job":
                fn = "count"  # "total jobs" counts them
            if fn == "count" and subject in (
                "cpu_hours",
                "gpu_hours",
                "duration_h",
                "queue_wait_min",
            ):
                fn = "sum"  # "how many GPU hours" totals them: hours are an amount, not items
            if all((a.fn, a.of) != (fn, subject) for a in out):
                out.append(AggCue(fn, subject, m.start()))
    return out


# 'rack 40 with the highest …' names rack 40, it asks for no top 40
_NOT_AN_ID = "".join(
    rf"(?<!{w} )" for w in ("rack", "node", "job", "user", "gpu", "racks", "nodes", "jobs", "users")
)


def _rank(text: str) -> RankCue | None:
    k: int | None = None
    anchor = -1
    top = re.search(rf"\b(?:top|bottom)[\s-]*{_N}?\b", text, re.I)
    counted = re.search(rf"\b(?:the\s+)?{_NOT_AN_ID}{_N}\s+(?:[\w-]+\s+){{0,3}}?"
                        rf"(?:longest|shortest|{_UP}|{_DOWN})\b"
                        rf"|\b{_N}\s+(?:[\w-]+\s+){{0,2}}?{_NOUN}\s+(?:with|having|by)"
                        rf"\s+(?:the\s+)?(?:{_UP}|{_DOWN}|longest|shortest)\b",
                        text, re.I)  # fmt: skip
    after = re.search(rf"\b(?:longest|shortest|{_UP}|{_DOWN})\s+{_N}\s+{_NOUN}", text, re.I)
    which = re.search(rf"\b(?:which|what)\s+(?:{_N}\s+)?(?:[\w-]+\s+){{0,2}}?{_NOUN}", text, re.I)
    single = re.search(
        r"\bthe\s+(?:longest|shortest|" + _UP + "|" + _DOWN + r")\s+(?:(?!of\b)[\w-]+\s+){0,2}?"
        r"(job|node|rack|user|gpu)\b(?!s)(?!\s*[\d#])",
        text,
        re.I,
    )
    # 'node in rack 40 with the highest p0_power peak': a singular noun first, then its rank
    lead = re.match(
        r"\s*(?:the\s+|which\s+)?(?:node|rack|user|gpu|job)\b(?!s)\s+(?:[\w#-]+\s+){0,4}?"
        r"(?:with|having|that\s+(?:had|has|drew|ran|saw))\s+the\s+(?:" + _UP + "|" + _DOWN + r")\b",
        text,
        re.I,
    )
    if lead:
        k, anchor = 1, lead.start()
    elif top:
        k, anchor = (_number(top.group(1)) if top.group(1) else None), top.start()
        ranks = rf"\b(?:longest|shortest|{_UP}|{_DOWN}|by)\b"
        if not re.search(ranks, text[anchor:], re.I) and re.search(ranks, text[:anchor], re.I):
            anchor = 0  # 'who ran the most jobs on the 9th? top 5': the ranking came first
    elif counted:
        k = _number(counted.group(1) or counted.group(2))
        anchor = counted.start()
    elif after:  # "the shortest 10 jobs"
        k, anchor = _number(after.group(1)), after.start()
    elif which and re.search(rf"\b(?:{_UP}|{_DOWN}|longest|shortest)\b", text, re.I):
        plural = which.group(2).lower().endswith("s")
        k = _number(which.group(1)) if which.group(1) else (None if plural else 1)
        anchor = which.start()
    elif single:
        k, anchor = 1, single.start()
    elif re.search(r"\b(?:longest|shortest)\b", text, re.I):
        anchor = 0  # "the longest jobs": an order without a limit
    else:
        return None
    scope = text[anchor:]
    noun_m = re.search(_NOUN, scope, re.I)
    noun = _singular(noun_m.group(1)) if noun_m else None
    return _rank_key(scope, k, noun)


def _rank_key(scope: str, k: int | None, noun: str | None) -> RankCue:
    # 'bottom 5 users by number of jobs': the lowest first, whatever the key
    bottom = re.match(r"bottom\b", scope, re.I) is not None
    if m := re.search(r"\b(longest|shortest)\b", scope, re.I):
        return RankCue(k, "job", "duration", None, m.group(1).lower() == "longest")
    by_jobs = re.search(
        r"\b(?:by\s+(?:the\s+)?(?:number\s+of\s+jobs|job\s+counts?|jobs)"
        r"|(most|fewest|least)\s+(?:number\s+of\s+)?jobs)\b",
        scope,
        re.I,
    )
    if by_jobs:
        said = by_jobs.group(1)
        return RankCue(k, noun, "count_job", "count", said == "most" if said else not bottom)
    if m := re.search(
        rf"\b(?:by|most|fewest|least)\s+(?:the\s+)?(?:total\s+)?({_HOURS})", scope, re.I
    ):
        key: RankKey = _hours_of(m.group(1))[0]
        word = m.group().split()[0].lower()
        desc = word == "most" or (word == "by" and not bottom)
        return RankCue(k, noun, key, "sum", desc)
    direction = re.search(rf"\b({_UP}|{_DOWN})\b", scope, re.I)
    desc = direction is None or re.fullmatch(_UP, direction.group(1), re.I) is not None
    if direction is None and bottom:
        desc = False  # 'bottom 3 racks by avg cpu user': the lowest means first
    start = direction.end() if direction else 0
    by = re.search(r"\bby\b", scope, re.I)
    if direction is None and by:
        start = by.end()
    after = AGG_WORD_RE.match(scope[start:].lstrip())
    if after is None and direction is not None:
        # 'the 3 coolest nodes by mean inlet temp', 'the 3 coolest racks (mean inlet)': the
        # statistic after 'by' or in brackets after the noun is the rank key
        by_stat = re.search(r"\bby\s+(?:the\s+|their\s+|its\s+)?|^\s*\w+\s*\(\s*(?:by\s+)?",
                            scope[start:], re.I)  # fmt: skip
        if by_stat is not None:
            after = AGG_WORD_RE.match(scope[start + by_stat.end() :])
    if after and after.lastgroup and after.lastgroup not in ("count", "p95"):
        return RankCue(k, noun, "value", after.lastgroup, desc)  # type: ignore[arg-type]
    if direction is not None and _RANKED_ON_AVERAGE.search(scope[direction.end() :]):
        # 'which 3 racks drew the least total power on average': the means, lowest first
        return RankCue(k, noun, "value", "avg", desc)
    if direction is not None:
        return RankCue(k, noun, "value", "max" if desc else "min", desc)
    # 'bottom 3 racks for mean gpu0 utilization': no key said, the lowest first all the same
    return RankCue(k, noun, None, None, desc)


def _job_filters(text: str, job_context: bool) -> list[JobFilter]:
    out: list[JobFilter] = []
    if re.search(r"\bsingle[\s-]node\b|\bone[\s-]node\b|\b1[\s-]node\b", text, re.I):
        out.append(JobFilter(field="num_nodes", op="eq", value=1))
    if re.search(r"\bmulti(?:ple)?[\s-]?nodes?\b", text, re.I):
        out.append(JobFilter(field="num_nodes", op="gt", value=1))
    # 'more than 4 nodes' first, then '8 or more nodes': one node-count filter
    for rx, ops in ((_NODES_FILTER, _NODE_OPS), (_NODES_OR, _NODE_OR_OPS),
                    (_NODES_THEN_OR, _NODE_OR_OPS)):  # fmt: skip
        if job_context and (m := rx.search(text)):
            word = " ".join(m.group("op").lower().split())
            out.append(JobFilter(field="num_nodes", op=ops[word], value=_number(m["n"])))
            break
    found: dict[str, int] = {}
    for state, start, _ in _state_spans(text):
        found.setdefault(state, start)
    states = sorted(found, key=found.__getitem__)  # in the order the question names them
    if states:
        out.append(
            JobFilter(field="state", op="eq", value=states[0])
            if len(states) == 1
            else JobFilter(field="state", op="in", value=list(states))
        )
    if m := _PARTITION.search(text):
        name = m.group(1) or m.group(2) or m.group(3)
        out.append(JobFilter(field="partition", op="eq", value=name))
    elif m := _PARTITION_ALIAS.search(text):
        alias = (m["a"] or m["b"] or m["c"]).lower()
        out.append(JobFilter(field="partition", op="eq", value=PARTITION_ALIASES[alias]))
    if re.search(
        r"\bgpu[\s-]jobs\b|\bjobs\s+(?:that\s+)?(?:using|used|use|with)\s+gpus?\b", text, re.I
    ):
        out.append(JobFilter(field="num_gpus", op="gt", value=0))
    elif re.search(r"\bcpu[\s-]only\s+jobs\b|\bjobs\s+without\s+gpus?\b", text, re.I):
        out.append(JobFilter(field="num_gpus", op="eq", value=0))
    return out


_STATE_WORD = re.compile(r"\b(?:job\s+)?(?:state|status)\s*(?:[=:]|of)?\s*$", re.IGNORECASE)


def _state_spans(text: str) -> list[tuple[str, int, int]]:
    """(state, start, end) of every job-state phrase; "node failure" is read before "failure"
    and then blanked, so it is never also a plain failure."""
    out: list[tuple[str, int, int]] = []
    masked = text
    for state, rx in _STATES:
        for m in re.finditer(rx, masked, re.I):
            out.append((state, m.start(), m.end()))
            masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]
    return out


def job_state_spans(text: str) -> list[tuple[int, int]]:
    """Where a question about jobs names job states ("failed", "ran out of memory"): job
    filters (read by ``read_intent``), never metric phrases. Node failures stay: Nagios
    measures them."""
    if not JOB_CUE_RE.search(text):
        return []
    out = []
    for state, start, end in _state_spans(text):
        # Slurm's own spelling ('NODE_FAIL') is the job state; 'node failures' Nagios measures
        if state == "NODE_FAIL" and "_" not in text[start:end]:
            continue
        # 'with state FAILED', 'status: TIMEOUT': the word 'state' belongs to the filter
        prefix = _STATE_WORD.search(text[:start])
        out.append((prefix.start() if prefix else start, end))
    return out


_CLAUSE_BREAK = re.compile(r",|;|\b(?:and|with|plus|also|then)\b", re.IGNORECASE)
_LEVEL_STAT = (
    (re.compile(r"\b(?:avg|average[ds]?|averaging|mean)\b", re.I), "avg"),
    (re.compile(r"\b(?:max|maximum|peak(?:s|ed|ing)?|highest)\b", re.I), "max"),
    (re.compile(r"\b(?:min|minimum|lowest)\b", re.I), "min"),
    (re.compile(r"\b(?:total(?:led|ed)?|sum(?:med)?)\b", re.I), "sum"),
)
_AVERAGED = r"on\s+average|in\s+average|on\s+avg"
# 'the least power on average': anywhere after the rank word; after a level, right after it
_RANKED_ON_AVERAGE = re.compile(rf"\b(?:{_AVERAGED})\b", re.I)
_ON_AVERAGE = re.compile(rf"^\s*(?:{_AVERAGED}|averaged)\b", re.I)
# 'the whole hour', not 'across the whole machine' (every node: heldout2 G12 was counted as the
# nodes whose every reading stayed below the level)
_EVERY_READING = re.compile(
    r"\b(?:stay(?:s|ed)?|remain(?:s|ed)?|kept|always|never|throughout"
    r"|the\s+(?:whole|entire|full)\s+(?:of\s+)?(?:\d|hour|day|window|period|time|interval|span"
    r"|morning|afternoon|evening|night|week|month|run|duration)"
    r"|all\s+(?:hour|day|along|the\s+time|of\s+the\s+time)"
    # 'at or above 95% on every single reading', 'in each of its samples'
    r"|(?:every|each)\s+(?:single\s+)?(?:one\s+of\s+(?:its|their|the)\s+)?"
    r"(?:readings?|samples?|measurements?|values?)"
    r"|all\s+(?:of\s+)?(?:its|their|the)\s+(?:readings|samples|measurements|values))\b",
    re.IGNORECASE,
)


def _thresholds(text: str) -> list[re.Match[str]]:
    """The thresholds ``text`` states, in order: 'above 30 °C', '280 W or more', 'hitting 90 °C'."""
    found = [*_VALUE_FILTER.finditer(text), *_VALUE_POSTFIX.finditer(text),
             *_REACHING.finditer(text)]  # fmt: skip
    return sorted(found, key=lambda m: m.start())


# 'never went above 10 %': every reading at or below it (the comparison negated)
_NEVER = re.compile(r"\bnever(?:\s+[a-z]+){0,2}\s+$", re.IGNORECASE)
_NEGATED: dict[str, Literal["gt", "lt", "ge", "le"]] = {"gt": "le", "ge": "lt", "lt": "ge",
                                                      "le": "gt"}  # fmt: skip


def _op_of(m: re.Match[str]) -> Literal["gt", "lt", "ge", "le"]:
    op = _stated_op(m)
    return _NEGATED[op] if _NEVER.search(m.string[max(0, m.start() - 40) : m.start()]) else op


def _stated_op(m: re.Match[str]) -> Literal["gt", "lt", "ge", "le"]:
    word = " ".join(m.group("op").lower().split())
    if m.re is _VALUE_POSTFIX:
        return "ge" if re.fullmatch(_OR_MORE, word) else "le"
    if m.re is _REACHING:
        # 'hit 0 %' is reached from above: the floor, so at most it (no reading is below 0 %)
        return "le" if float(m.group("v")) <= 0 else "ge"
    if word in ("at least", "at most"):
        return "ge" if word == "at least" else "le"
    if word.startswith("at or "):  # 'at or below 5 %'
        return "le" if word.split()[-1] in ("below", "under") else "ge"
    if word[:1] in "<>":  # '> 24 °C', '<= 500 W'
        return _SIGN_OPS[word]
    return "gt" if re.fullmatch(_COMPARE, word) else "lt"


@functools.cache
def _total_names() -> tuple[str, ...]:
    """Catalogue metrics whose own name starts with 'total' ('total power' is ipmi
    total_power), longest first."""
    names = {words for m in load_catalogue() for words in m.said()}
    return tuple(sorted((n for n in names if n.startswith("total ")), key=len, reverse=True))


def _names_a_total(text: str) -> bool:
    """Whether ``text`` opens with a metric's own name that starts with 'total': 'kept total
    power below 700 W' states the level on every reading, not on a sum."""
    words = " ".join(re.findall(r"[a-z0-9]+", text[:60].lower()))
    return any(words == n or words.startswith(n + " ") for n in _total_names())


def level_statistic(text: str) -> Level:
    """The statistic the question's first threshold is stated on (see ``Level``)."""
    stated = _thresholds(text)
    if not stated:
        return NO_LEVEL
    m = stated[0]
    before = text[: m.start()]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    clause = before[breaks[-1].end() :] if breaks else before
    found = [(hit.start(), fn) for rx, fn in _LEVEL_STAT for hit in rx.finditer(clause)
             if not _names_a_total(clause[hit.start() :])]  # fmt: skip
    fn = max(found)[1] if found else None  # the statistic nearest the threshold
    if fn is None and _ON_AVERAGE.search(text[m.end() :]):
        fn = "avg"
    return Level(fn=fn, every=_EVERY_READING.search(text) is not None)


def threshold_units(text: str) -> frozenset[str]:
    """The units the question's thresholds are stated in, as the catalogue spells them
    ('above 45 °C' -> °C, 'over 1000 watts' -> W, 'under 20 percent' -> %, '1.6 kW' -> kW)."""
    out = set()
    for m in _thresholds(text):
        unit = m.group("unit").lower()
        out.add("%" if unit in ("%", "percent") else "W" if unit[:1] == "w"
                else "kW" if unit[:1] == "k" else "°C")  # fmt: skip
    if _AT_LEVEL.search(text):
        out.add("%")
    return frozenset(out)


def threshold_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Character spans of the thresholds ``text`` states ('at most 10 %', '280 W or more')."""
    return tuple(m.span() for m in _thresholds(text))


def has_value_filter(text: str) -> bool:
    """Whether ``text`` states a threshold the planner reads ("above 30 °C", "under 80 %")."""
    return bool(_thresholds(text)) or _AT_LEVEL.search(text) is not None


_SIGN_OPS: dict[str, Literal["gt", "lt", "ge", "le"]] = {">": "gt", ">=": "ge", "<": "lt",
                                                        "<=": "le"}  # fmt: skip


def _value_filters(text: str) -> list[ValueFilter]:
    out: list[ValueFilter] = []
    for m in _thresholds(text):
        out.append(ValueFilter(op=_op_of(m), value=float(m.group("v"))))
    for m in _AT_LEVEL.finditer(text):
        out.append(ValueFilter(op="eq", value=float(m.group("v"))))
    return out


def _without_threshold_words(text: str) -> str:
    """``text`` with the comparison words of its thresholds blanked ('at least', 'at most')."""
    for m in _thresholds(text):
        a, b = m.span("op")
        text = text[:a] + " " * (b - a) + text[b:]
    return text


# '(completed, failed, cancelled and so on)', 'such as failed or timed out': states given as
# examples of the groups a per-state question asks for, not a filter on them
_EXAMPLES = re.compile(
    r"\([^()]*\)|\b(?:such\s+as|e\.?\s?g\.?|like|including)\s+[^.?!;()]*"
    r"|(?:\b[\w-]+\s*,\s*)+[\w\s-]*?\b(?:and|or)\s+(?:so\s+on|the\s+like|others?|more|the\s+rest)\b"
    r"|(?:\b[\w-]+\s*,\s*)+[\w\s-]*?\betc\b\.?",
    re.IGNORECASE,
)


def _without_examples(text: str) -> str:
    """``text`` with its lists of examples blanked, offsets kept."""
    return _EXAMPLES.sub(lambda m: " " * len(m.group()), text)


def read_intent(text: str) -> Cues:
    """Read the computation cues of ``text`` (temporal phrases already blanked by the caller)."""
    notes: list[str] = []
    job_window = _JOB_WINDOW.search(text)
    if job_window:  # "over their whole duration" is a window, not a duration to compute
        text = text[: job_window.start()] + " " * len(job_window.group()) + text[job_window.end() :]
    stated = _without_threshold_words(text)  # 'at most 10 %' ranks nothing and is no max
    rank = _rank(stated)
    aggs = _aggregations(stated, ranking=rank is not None and rank.key == "value", notes=notes)
    groups = tuple(g for g, rx in _GROUPS if re.search(rx, text, re.I))
    hours = tuple(_hours_of(" ".join(m.group() for m in _HOURS_RE.finditer(text))))
    job_cue = bool(JOB_CUE_RE.search(text))
    filtered = _without_examples(text) if "state" in groups else text
    count_m = _COUNT_ENTITIES.search(text)
    return Cues(
        aggs=tuple(aggs),
        groups=groups,
        minute=bool(_MINUTE.search(text)),
        rank=rank,
        job_filters=tuple(_job_filters(filtered, job_cue)),
        value_filters=tuple(_value_filters(text)),
        hours=hours,
        duration=bool(rank and rank.key == "duration")
        or any(a.of == "duration_h" for a in aggs)
        or bool(job_cue and _DURATION_ANY.search(text)),
        job_cue=job_cue,
        count_entities=_singular(count_m.group(1)) if count_m else None,
        job_window=job_window is not None,
        plots=frozenset(kind for kind, rx in _PLOTS if re.search(rx, text, re.I)),
        no_split=bool(_NO_SPLIT.search(text)),
        notes=tuple(notes),
        compare=bool(_COMPARE_CUE.search(text)),
        per_socket=bool(_PER_SOCKET.search(text)),
        wait=bool(_WAIT_RE.search(text)) or any(a.of == "queue_wait_min" for a in aggs),
    )


def cues_of(
    said: RetrievalReading,
    windows: Sequence[ParsedWindow],
    entities: Entities,
    infos: Sequence[MetricInfo],
) -> Cues:
    """The computation cues of the question, once its grounded metrics are known (see
    ``_cue_text``)."""
    cues = read_intent(_cue_text(said.text, windows, entities, infos))
    # a chart named outside the retrieval's words ('…, box plot') still asks for its series
    drawn = {kind for kind, _ in _PLOTS} & set(said.charts)
    # 'bar chart: avg node power for racks 10 thru 14': a bar (a wedge) per rack named, where
    # racks named without a chart are one figure taken together
    bars = bool(_PER_ENTITY_CHARTS & set(said.charts)) and len(entities.racks) > 1
    if (said.compares or (bars and not cues.no_split)) and not cues.compare:
        cues = replace(cues, compare=True)  # 'which of racks 3 and 4 ran hotter on average'
    cues = _grid_rows(said, entities, cues)
    return replace(cues, plots=cues.plots | drawn) if drawn - cues.plots else cues


_TIME_GROUPS = frozenset({"hour", "day"})
_ROW_GROUPS = frozenset({"node", "rack", "gpu", "user", "job", "metric"})


def _grid_rows(said: RetrievalReading, entities: Entities, cues: Cues) -> Cues:
    """'heatmap of hourly avg node power for the rack 33 nodes': a heatmap per hour (or day)
    needs a row per entity, the nodes of the one rack named or each of several racks, where
    the racks alone would be one figure per hour taken together."""
    if ("heatmap" not in said.charts or not _TIME_GROUPS & set(cues.groups)
            or _ROW_GROUPS & set(cues.groups) or cues.no_split or not entities.racks
            or entities.nodes):  # fmt: skip
        return cues
    row: GroupKey = "node" if len(entities.racks) == 1 else "rack"
    return replace(cues, groups=(row, *cues.groups))


def _cue_text(
    question: str, windows: Sequence[ParsedWindow], entities: Entities, infos: Sequence[MetricInfo]
) -> str:
    """The question with what is not a cue blanked, keeping character positions.

    Temporal phrases go (``on 1 June 2022`` holds no cue), id digits become ``#`` (``node 920
    the highest`` is no top-920), and mentions of grounded metrics that contain a cue word go, so
    that the metric's own name is not read as a computation: an aggregation word (``total
    power``, ``load average``) or a job word (``user CPU`` is cpu_user, no user's jobs). A mention
    includes the words the metric's name already says: ``total`` before a metric named total
    (``total ICT power`` is Tot_ict, no sum) and ``number of``/``how many`` before a count metric
    (``number of idle nodes`` is total_nodes_idle's value, no count of its readings).
    """
    chars = list(question)

    def blank(start: int, end: int, fill: str = " ") -> None:
        chars[start:end] = [fill if fill == " " or c.isdigit() else c for c in chars[start:end]]

    for w in windows:
        for m in re.finditer(re.escape(w.text), question) if w.text else ():
            blank(*m.span())
    for start, end in entities.spans:
        blank(start, end, "#")
    for info in infos:
        for rx in _mention_res(info):
            for m in rx.finditer(question):
                if AGG_WORD_RE.search(m.group()) or JOB_CUE_RE.search(m.group()):
                    blank(*m.span())
    return "".join(chars)


_TOTAL_WORD = re.compile(r"\b(?:total|tot)\b")
_PREFIX_TOTAL = r"total\s+"
_PREFIX_COUNT = r"(?:the\s+)?(?:total\s+)?(?:number|count|amount)\s+of\s+(?:the\s+)?|how\s+many\s+"


def _mention_res(info: MetricInfo) -> list[re.Pattern[str]]:
    """Mentions of a metric: each synonym and its name, after the prefix the metric implies."""
    phrases = [p for p in dict.fromkeys((*info.synonyms, normalise_phrase(info.name))) if p]
    prefixes = [_PREFIX_COUNT] if info.kind == "count" else []
    if any(_TOTAL_WORD.search(p) for p in phrases):
        prefixes.append(_PREFIX_TOTAL)
    prefix = f"(?:{'|'.join(prefixes)})?" if prefixes else ""
    return [
        re.compile(
            rf"(?<!\w){prefix}" + r"[\s_-]+".join(map(re.escape, p.split())) + r"(?!\w)",
            re.IGNORECASE,
        )
        for p in phrases
    ]
