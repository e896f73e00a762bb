"""Cost of the sandbox: the histogram recipe on Q4's 176k readings, sandboxed and not.

The same script (``recipes.script("histogram", …)`` on a 176,000-row CSV) runs as a plain
subprocess of the sandbox's interpreter (no isolation; the reference) and in each sandbox
backend, all in this one run. ``cold`` is each one's first run, ``warm`` the median of the next
``--repeat`` runs; ``ratio`` is warm over plain warm (goal: ≤ 1.5). ``start`` is the median of
an empty script, the fixed cost of one sandbox. ``<backend>+ex`` is a started session's warm
executor (one sandbox that has imported pandas/numpy/matplotlib and forks per script, what the
MCP server runs): its ``start`` is the time to launch it, paid once per session.

    python bench/sandbox_overhead.py [--repeat 5] [--backends gvisor,bwrap]

Last line, for scripts:
    overhead: plain_warm_s=… gvisor_warm_s=… gvisor_ratio=… gvisor_executor_warm_s=…
              gvisor_executor_ratio=… (and the same for bwrap), on one line
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from oda_analyst.codeagent import recipes
from oda_analyst.codeagent.backends.base import sandbox_environ, site_dir
from oda_analyst.codeagent.backends.select import choose
from oda_analyst.codeagent.executor import WarmExecutor
from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.pyenv import SandboxEnv, locate
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace

ROWS = 176_000
TITLE = "Q4 · Inlet temperature of all nodes, 1 June 2022 08:00–09:00 UTC"
SCRIPT = recipes.script("histogram", data="q4_inlet.csv", column="value", unit="°C",
                        xlabel="Inlet temperature", out="q4.png", title=TITLE)  # fmt: skip


def write_q4(folder: Path) -> Path:
    """176,000 inlet readings: ~980 nodes over an hour, with an outlier cluster near 41 °C."""
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.normal(23.5, 1.2, ROWS - 6_000), rng.normal(41, 1, 6_000)])
    path = folder / "q4_inlet.csv"
    pl.DataFrame({"node": rng.integers(0, 980, ROWS), "value": values}).write_csv(path)
    return path


def plain(env: SandboxEnv, ws: Workspace, source: str) -> Callable[[], float]:
    """The script as an ordinary subprocess of the same interpreter, same environment."""
    script = ws.root / "plain_main.py"
    script.write_text(source, "utf-8")
    environ = sandbox_environ(env, Limits()) | {
        "PYTHONPATH": str(site_dir()), "ODA_IN": str(ws.inputs), "ODA_OUT": str(ws.outputs),
        "MPLCONFIGDIR": str(ws.root / "mpl"),
    }  # fmt: skip

    def run() -> float:
        start = time.monotonic()
        subprocess.run([str(env.python), str(script)], env=environ, check=True,
                       capture_output=True, cwd=ws.root)  # fmt: skip
        return time.monotonic() - start

    return run


def sandboxed(
    backend_name: str, env: SandboxEnv, ws: Workspace, source: str
) -> Callable[[], float]:
    backend = choose(backend_name)

    def run() -> float:
        start = time.monotonic()
        result = execute(source, ws, backend=backend, env=env)
        if result.status != "ok":
            raise RuntimeError(f"{backend_name}: {result.status} {result.stderr[-500:]}")
        return time.monotonic() - start

    return run


def session(
    backend_name: str, env: SandboxEnv, ws: Workspace, source: str
) -> tuple[Callable[[], float], Callable[[], None], float]:
    """A started session's warm executor: (run, close, seconds to launch it)."""
    start = time.monotonic()
    executor = WarmExecutor(choose(backend_name), env, ws.inputs, ws.outputs, Limits())
    launched = time.monotonic() - start

    def run() -> float:
        begin = time.monotonic()
        result = execute(source, ws, executor=executor)
        if result.status != "ok":
            raise RuntimeError(f"{backend_name}: {result.status} {result.stderr[-500:]}")
        return time.monotonic() - begin

    return run, executor.close, launched


def measure(run: Callable[[], float], repeat: int) -> tuple[float, float]:
    """(cold, warm median)."""
    cold = run()
    return cold, statistics.median(run() for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", default="gvisor,bwrap")
    args = parser.parse_args(argv)
    env = locate()
    names = [n for n in args.backends.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="oda-overhead-") as tmp:
        ws = Workspace(Path(tmp) / "bench")
        write_q4(ws.inputs)
        rows: dict[str, tuple[float, float, float]] = {}
        cold, warm = measure(plain(env, ws, SCRIPT), args.repeat)
        empty = statistics.median(plain(env, ws, "pass")() for _ in range(args.repeat))
        rows["plain"] = (cold, warm, empty)
        for name in names:
            cold, warm = measure(sandboxed(name, env, ws, SCRIPT), args.repeat)
            start = sandboxed(name, env, ws, "pass")
            empty = statistics.median(start() for _ in range(args.repeat))
            rows[name] = (cold, warm, empty)
            run, close, launched = session(name, env, ws, SCRIPT)
            try:
                cold, warm = measure(run, args.repeat)
            finally:
                close()
            rows[f"{name}+ex"] = (cold, warm, launched)
    base = rows["plain"][1]
    print(f"histogram recipe on {ROWS:,} rows; warm = median of {args.repeat} runs")
    print(f"{'run':<8} {'cold_s':>8} {'warm_s':>8} {'ratio':>7} {'start_s':>8}")
    for name, (cold, warm, empty) in rows.items():
        print(f"{name:<8} {cold:>8.2f} {warm:>8.2f} {warm / base:>7.2f} {empty:>8.2f}")
    tail = [f"plain_warm_s={base:.2f}"] + [
        f"{n}_warm_s={rows[n][1]:.2f} {n}_ratio={rows[n][1] / base:.2f} "
        f"{n}_executor_warm_s={rows[n + '+ex'][1]:.2f} "
        f"{n}_executor_ratio={rows[n + '+ex'][1] / base:.2f}"
        for n in names
    ]
    print("overhead: " + " ".join(tail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
