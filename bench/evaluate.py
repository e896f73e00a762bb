"""The paper's benchmark (section IV): three configurations side by side, with its tables.

Runs a question set through each backend — ``nsa`` (our Reflect retriever), ``sota1`` (the
EXASAGE Query Tool baseline), ``sota2`` (the Datalake Query Tool baseline) — classes every
answer against an oracle computed independently with Polars (``bench/evalkit/classify.py``:
correct, hallucinated, incomplete, failed, clarification), records data-retrieval and
code-execution success, tokens per component (coordinator / retrieval / code), retries and
latency, prints Tables I-III and, per configuration, every answer not counted correct with its
class and a one-line reason (the oracle's diff, or the answer's own refusal, clarification or
failure message; the JSON's ``failures``), writes JSON (``--json``) and one comparison PNG
(``--plot``). The last line, for scripts:

    evaluate: set=<e2e|retrieval> nsa=<c>/<n> sota1=<c>/<n> sota2=<c>/<n> nsa_hallucinated=<k>

Usage: python bench/evaluate.py [--set e2e|retrieval] [--backend nsa,sota1,sota2]
       [--questions FILE] [--only ID,ID] [--lake DIR] [--data-dir DIR] [--json OUT]
       [--plot PNG] [--start-llama]

Sets: ``e2e`` = ``bench/sets/appendix_a.yaml`` (the 14 Appendix-A questions), ``retrieval`` =
``bench/sets/retrieval.yaml``. Without ``--lake`` the `sample` lake is generated once into the
cache (as ``bench/retrieval_eval.py`` does). With ``ODA_LLM_BASE_URL``/``ODA_LLM_MODEL`` set,
every configuration that uses a model uses that one (``nsa`` at every stage; the baselines are
rule-based here), and tokens come from each answer's trace. The e2e set runs through
``oda-analyst ask --backend B --out DIR``: the coordinator retrieves through backend B's MCP
server and runs the code step in the sandbox, so Table I counts data retrieval, code execution
and both for each configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from devset import oracle  # noqa: E402
from evalkit.classify import classify  # noqa: E402
from evalkit.report import (  # noqa: E402
    Row,
    explanations,
    failures,
    plot,
    rows_from_json,
    summary_line,
    table_one,
    table_three,
    table_two,
    token_totals,
)
from evalkit.runners import retrieval_view, run_cli, run_mcp, served  # noqa: E402
from evalkit.sets import SET_FILES, Item, load_set  # noqa: E402

BACKENDS = ("nsa", "sota1", "sota2")
E2E_NOTE = (
    "e2e: each question through `oda-analyst ask --backend B` (the coordinator, then the code "
    "step in the sandbox); a class is the retrieval's rows against the oracle, and the last "
    "line counts a question correct only when its code step also made what was asked"
)


def _progress(row: Row) -> None:
    print(
        f"{row.backend:<6} {row.id:<6} {row.verdict.cls:<13} {row.run.seconds:7.2f} s "
        f"{row.verdict.reason[:110]}",
        file=sys.stderr,
        flush=True,
    )


async def _retrieval(
    items: list[Item], backend: str, settings: Any, lake: Path, table: Any
) -> list[Row]:
    from fastmcp import Client

    rows = []
    with served(backend, settings) as server:
        async with Client(server, timeout=3600) as client:
            for item in items:
                run = await run_mcp(client, item)
                row = Row(item.id, backend, classify(run.answer, item.expect, lake, table), run)
                _progress(row)
                rows.append(row)
    return rows


def _e2e(items: list[Item], backend: str, lake: Path, data_dir: Path, table: Any) -> list[Row]:
    env = {"ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data_dir)}
    rows = []
    for item in items:
        run = run_cli(item, backend, env, data_dir / "out" / backend / item.id)
        verdict = classify(retrieval_view(run.answer), item.expect, lake, table)
        row = Row(item.id, backend, verdict, run)
        _progress(row)
        rows.append(row)
    return rows


def evaluate(
    set_name: str, items: list[Item], backends: list[str], lake: Path, data_dir: Path
) -> tuple[list[Row], list[str]]:
    """Every item through every backend; the rows and the notes to print before the tables."""
    from oda_analyst.config import load_settings

    notes: list[str] = []
    table = oracle.jobs(lake)
    e2e = set_name == "e2e"
    if e2e:
        notes.append(E2E_NOTE)
    rows: list[Row] = []
    for backend in backends:
        if e2e:
            rows += _e2e(items, backend, lake, data_dir, table)
            continue
        settings = load_settings(lake=str(lake), data_dir=data_dir / backend)
        rows += asyncio.run(_retrieval(items, backend, settings, lake, table))
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--set", dest="set_name", choices=["e2e", "retrieval"], default="e2e")
    parser.add_argument(
        "--backend",
        default=",".join(BACKENDS),
        help="comma-separated: nsa,sota1,sota2 (default all three)",
    )
    parser.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="a set file (default: bench/sets/appendix_a.yaml or retrieval.yaml)",
    )
    parser.add_argument("--only", default=None, help="comma-separated question ids")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="print the tables of JSON records written by earlier runs (parts of one set) "
        "instead of running; a question answered in several keeps its first record",
    )
    parser.add_argument(
        "--start-llama",
        action="store_true",
        help="start llama.cpp with SmolLM2 on loopback (as bench/model_paths.py does) and run "
        "with it as ODA_LLM_BASE_URL",
    )
    parser.add_argument("--lake", type=Path, default=None, help="default: the cached sample lake")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="PNG path (default: beside --json, else evaluate-<set>.png)",
    )
    args = parser.parse_args(argv)
    if args.start_llama:
        return _with_llama([a for a in (argv if argv is not None else sys.argv[1:])
                            if a != "--start-llama"])  # fmt: skip
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose among {', '.join(BACKENDS)}")
    path = args.questions or SET_FILES[args.set_name]
    if not path.is_file():
        print(f"error: no question set at {path}", file=sys.stderr)
        print("hint: pass --questions FILE (the dev set's format)", file=sys.stderr)
        return 2
    items = load_set(path)
    if args.merge:
        return _merged(args, backends, items)
    if args.only:
        wanted = set(args.only.split(","))
        items = [i for i in items if i.id in wanted]
    if args.lake is None:
        from retrieval_eval import sample_lake

        lake = sample_lake()
    else:
        lake = args.lake
    tmp = None if args.data_dir else Path(tempfile.mkdtemp(prefix="oda-evaluate-"))
    data_dir = args.data_dir or tmp
    assert data_dir is not None
    model = os.environ.get("ODA_LLM_MODEL") if os.environ.get("ODA_LLM_BASE_URL") else None
    began = time.perf_counter()
    try:
        rows, notes = evaluate(args.set_name, items, backends, lake, data_dir)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    for note in notes:
        print(note)
    _print_tables(rows, backends, model)
    png = args.plot or (
        args.json_out.with_suffix(".png")
        if args.json_out
        else Path(f"evaluate-{args.set_name}.png")
    )
    title = f"{args.set_name}: {len(items)} questions, model {model or 'none'}"
    print(f"plot: {plot(rows, backends, png, title)}")
    if args.json_out:
        record = {
            "set": args.set_name,
            "questions": str(path),
            "lake": str(lake),
            "model": model,
            "backends": backends,
            "notes": notes,
            "seconds": round(time.perf_counter() - began, 1),
            "failures": {b: explanations(rows, b) for b in backends},
            "rows": [r.to_json() for r in rows],
        }
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(record, indent=2, default=str))
        print(f"json: {args.json_out}")
    print(summary_line(args.set_name, rows, backends))
    return 0


def _with_llama(argv: list[str]) -> int:
    """``main(argv)`` with a llama.cpp server of our own as the OpenAI-compatible endpoint."""
    from model_paths import llama_server

    keys = ("ODA_LLM_BASE_URL", "ODA_LLM_MODEL")
    saved = {k: os.environ.get(k) for k in keys}
    with llama_server() as (base, name):
        print(f"model: {name} at {base} (llama.cpp, started for this run)", flush=True)
        os.environ.update({"ODA_LLM_BASE_URL": base, "ODA_LLM_MODEL": name})
        try:
            return main(argv)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _print_tables(rows: list[Row], backends: list[str], model: str | None) -> None:
    print(table_one(rows, backends, model or "none (rules)"))
    print()
    print(table_two(rows, backends))
    print()
    print(token_totals(rows, backends))
    print()
    print(table_three(rows, backends))
    print()
    for b in backends:
        print(failures(rows, b))


def _merged(args: argparse.Namespace, backends: list[str], items: list[Item]) -> int:
    """The tables of several JSON records of one set, in the set's question order."""
    seen: dict[tuple[str, str], Row] = {}
    model = None
    notes: list[str] = []
    for path in args.merge:
        record = json.loads(path.read_text())
        model = model or record.get("model")
        notes += [n for n in record.get("notes", []) if n not in notes]
        for row in rows_from_json(record):
            seen.setdefault((row.backend, row.id), row)
    order = {item.id: i for i, item in enumerate(items)}
    rows = sorted(
        (r for r in seen.values() if r.backend in backends and r.id in order),
        key=lambda r: (backends.index(r.backend), order[r.id]),
    )
    for note in notes:
        print(note)
    _print_tables(rows, backends, model)
    png = args.plot or Path(f"evaluate-{args.set_name}.png")
    title = f"{args.set_name}: {len(rows)} answers, model {model or 'none'}"
    print(f"plot: {plot(rows, backends, png, title)}")
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "set": args.set_name,
                    "model": model,
                    "backends": backends,
                    "merged": [str(p) for p in args.merge],
                    "failures": {b: explanations(rows, b) for b in backends},
                    "rows": [r.to_json() for r in rows],
                },
                indent=2,
            )
        )
        print(f"json: {args.json_out}")
    print(summary_line(args.set_name, rows, backends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
