"""Load on the retriever's MCP server: N concurrent clients, a mixed question set, one real server.

Two servers (``oda-analyst mcp --transport http`` on 127.0.0.1 only, each on its own data folder
over one generated lake):
1. the **reference** server answers every distinct question once, one after another;
2. the **load** server gets ``--clients`` concurrent MCP clients (client i asks question
   i mod Q) while cold (just started: nothing parsed, built or cached), then the same burst again
   while warm.
Every answer is compared with the reference one (status, columns, rows — the CSV file's bytes
when the result came as a file —, row count, SPARQL, error code). A client refused with
"busy: … retry after N s" waits N s and retries (at most ``--busy-retries`` times); refusals are
counted apart. Reported per burst: consistent answers, errors, p50/p95 latency, throughput; and
the load server's peak RSS.

    python bench/load.py [--clients 32] [--lake DIR] [--keep]

Requests are bounded: one call per client per burst, ``--call-timeout-s`` each.
Last line, for scripts (consistent: clients whose cold and warm answers both matched; errors: over
both bursts; p95_s, rps: the warm burst):
    load: clients=N consistent=C/N errors=E p95_s=… rps=… cold_p95_s=… cold_rps=… peak_rss_mb=…
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError

from oda_analyst.lake.synth import build_spec, generate

LOOPBACK = "127.0.0.1"
QUESTIONS = (
    "Retrieve the total power consumption for node 900 on 1 June 2022 from 00:00 to 01:00",
    "the temperature of node 900 on 1 June 2022 from 00:10 to 00:20",  # a clarification
    "the flux capacitor reading of node 900 on 1 June 2022",  # rejected
    "the average ambient temperature of node 900 on 1 June 2022 from 00:00 to 06:00",
    "the maximum total power of node 900 on 1 June 2022 between 02:00 and 04:00",
    "ambient temperature of node 900 on 1 June 2022 from 03:00 to 03:30",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class Server:
    """One ``oda-analyst mcp`` HTTP server process on loopback."""

    def __init__(self, env: dict[str, str], log: Path, startup_s: float = 180.0) -> None:
        self.port = _free_port()
        self.log = log
        cmd = [sys.executable, "-m", "oda_analyst.cli", "mcp", "--transport", "http",
               "--host", LOOPBACK, "--port", str(self.port)]  # fmt: skip
        with log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the server did not start within {startup_s:.0f} s")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def client(self, timeout_s: float) -> Client[StreamableHttpTransport]:
        transport = StreamableHttpTransport(f"{self.url}/mcp", headers={"x-oda-user": "bench"})
        return Client(transport, timeout=timeout_s)

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def digest(answer: dict[str, Any]) -> str:
    """What must not differ between two answers to one question (no ids, paths or timings)."""
    csv = answer.get("csv")
    body = Path(csv).read_bytes() if csv else b""
    parts = [answer.get("status"), answer.get("columns"), answer.get("rows"),
             answer.get("row_count"), answer.get("sparql"),
             (answer.get("error") or {}).get("code"), hashlib.sha256(body).hexdigest()]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@dataclass
class Outcome:
    question: str
    seconds: float
    digest: str | None = None
    error: str | None = None
    busy: int = 0
    status: str | None = None


@dataclass
class Burst:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    def latencies(self) -> list[float]:
        return sorted(o.seconds for o in self.outcomes if o.error is None)

    def p(self, q: float) -> float:
        lat = self.latencies()
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")


async def ask(server: Server, question: str, timeout_s: float, busy_retries: int) -> Outcome:
    start = time.perf_counter()
    busy = 0
    async with server.client(timeout_s) as client:
        while True:
            try:
                result = await client.call_tool("query", {"question": question})
            except ToolError as exc:
                text = str(exc)
                if text.startswith("busy: ") and busy < busy_retries:
                    busy += 1
                    wait = int(text.rsplit("retry after ", 1)[1].split(" ", 1)[0])
                    await asyncio.sleep(wait)
                    continue
                return Outcome(question, time.perf_counter() - start, error=text, busy=busy)
            except Exception as exc:  # transport errors, timeouts: counted, shown
                error = f"{type(exc).__name__}: {exc}"
                return Outcome(question, time.perf_counter() - start, error=error, busy=busy)
            seconds, answer = time.perf_counter() - start, result.structured_content
            return Outcome(question, seconds, digest(answer), busy=busy, status=answer["status"])


async def burst(name: str, server: Server, clients: int, args: argparse.Namespace) -> Burst:
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(clients)]
    start = time.perf_counter()
    outcomes = await asyncio.gather(
        *(ask(server, q, args.call_timeout_s, args.busy_retries) for q in questions)
    )
    return Burst(name, list(outcomes), time.perf_counter() - start)


def report(b: Burst, reference: dict[str, str]) -> int:
    consistent = sum(
        1 for o in b.outcomes if o.digest is not None and o.digest == reference[o.question]
    )
    errors = sum(1 for o in b.outcomes if o.error is not None)
    busy = sum(o.busy for o in b.outcomes)
    n = len(b.outcomes)
    print(f"{b.name}: {n} clients, consistent {consistent}/{n}, errors {errors}, busy refusals "
          f"{busy}, p50 {b.p(0.5):.2f} s, p95 {b.p(0.95):.2f} s, wall {b.wall_s:.2f} s, "
          f"{n / b.wall_s:.2f} req/s")  # fmt: skip
    for o in b.outcomes:
        if o.error is not None:
            print(f"  error ({o.question[:40]}…): {o.error[:300]}")
        elif o.digest != reference[o.question]:
            print(f"  inconsistent answer to {o.question!r}")
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--lake", type=Path, help="an M100-layout lake (default: generate one)")
    parser.add_argument("--call-timeout-s", type=float, default=300.0)
    parser.add_argument("--busy-retries", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="oda-load-"))
    lake = args.lake
    if lake is None:
        lake = work / "lake"
        generate(build_spec("tiny", nodes="900", plugins="ipmi", metrics="total_power,ambient"),
                 lake)  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    base.update({"ODA_LAKE": str(lake), "HF_HUB_OFFLINE": "1", "ODA_ROW_LIMIT": "20"})
    if "ODA_CACHE_DIR" in os.environ:
        base["ODA_CACHE_DIR"] = os.environ["ODA_CACHE_DIR"]
    servers: list[Server] = []
    try:
        ref_server = Server({**base, "ODA_DATA_DIR": str(work / "ref")}, work / "ref.log")
        servers.append(ref_server)
        reference: dict[str, str] = {}
        statuses: list[str] = []
        for q in QUESTIONS:
            got = asyncio.run(ask(ref_server, q, args.call_timeout_s, 0))
            if got.digest is None:
                raise SystemExit(f"the reference server failed on {q!r}: {got.error}")
            reference[q] = got.digest
            statuses.append(f"{got.status} {got.seconds:.2f} s")
        print(f"reference: {len(QUESTIONS)} questions one at a time, cold: {', '.join(statuses)}")
        ref_server.stop()
        server = Server({**base, "ODA_DATA_DIR": str(work / "load")}, work / "load.log")
        servers.append(server)
        cold = asyncio.run(burst("cold", server, args.clients, args))
        warm = asyncio.run(burst("warm", server, args.clients, args))
        cold_err, warm_err = report(cold, reference), report(warm, reference)
        both = sum(1 for c, w in zip(cold.outcomes, warm.outcomes, strict=True)
                   if c.digest == w.digest == reference[c.question])  # fmt: skip
        peak = server.peak_rss_mb()
        print(f"load server peak RSS {peak:.0f} MB")
        n = args.clients
        print(f"load: clients={n} consistent={both}/{n} errors={cold_err + warm_err} "
              f"p95_s={warm.p(0.95):.2f} rps={n / warm.wall_s:.2f} "
              f"cold_p95_s={cold.p(0.95):.2f} cold_rps={n / cold.wall_s:.2f} "
              f"peak_rss_mb={peak:.0f}")  # fmt: skip
    finally:
        for s in servers:
            s.stop()
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
