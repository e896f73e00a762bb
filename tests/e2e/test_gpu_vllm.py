"""On a GPU machine (opt-in: ``--run-gpu``): vLLM started with the flags the chart gives its
model Deployment (tool-call parser, max model length, served model name), a small model from
the machine's own disk, and one question answered through it — the time stage forced onto the
model — with the figures checked against Polars on the lake.

Nothing is downloaded: the model is ``$ODA_GPU_MODEL`` (a local folder or a Hugging Face id
already in the local cache), else Qwen2.5-0.5B-Instruct when the Hugging Face cache holds it.
Without a GPU, vLLM or such a model the test is skipped and says which is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import retrieval_eval
from alerting import free_port
from fixtures_lake import cli_command
from helm_tool import CHART, locate_helm
from k8s_node import wait_for
from oda_analyst.retriever.answer import AnswerPayload
from processes import stop_process

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1800)]

SMALL_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _gpu_missing() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU on this machine (nvidia-smi is not installed)"
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    if listed.returncode != 0 or "GPU" not in listed.stdout:
        return f"no NVIDIA GPU on this machine (nvidia-smi -L: {listed.stderr.strip() or 'none'})"
    return None


def _vllm() -> str | None:
    local = Path(sys.executable).parent / "vllm"
    return str(local) if local.exists() else shutil.which("vllm")


def _local_model() -> str | None:
    chosen = os.environ.get("ODA_GPU_MODEL")
    if chosen:
        return chosen
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    folder = hub / f"models--{SMALL_MODEL.replace('/', '--')}"
    return SMALL_MODEL if folder.is_dir() else None


def _chart_vllm_args(tmp: Path, model: str) -> list[str]:
    """The vllm serve arguments of the chart's model Deployment, for this model."""
    helm = locate_helm(tmp / "helm-home")
    values = {"vllm": {"enabled": True, "models": [{
        "name": "small", "model": model, "gpus": 1, "maxModelLen": 8192,
        "toolCallParser": "hermes", "cache": {"size": "10Gi"}}]}}  # fmt: skip
    (tmp / "values.yaml").write_text(yaml.safe_dump(values))
    done = helm.run("template", "rel", str(CHART), "-f", str(tmp / "values.yaml"))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Deployment"]
    (dep,) = [d for d in docs if d["metadata"]["name"].endswith("-vllm-small")]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["vllm", "serve"]
    return [str(a) for a in container["args"]]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = _gpu_missing()
    if missing:
        pytest.skip(missing)
    binary = _vllm()
    if binary is None:
        pytest.skip("vLLM is not installed here (pip install vllm on the GPU machine)")
    model = _local_model()
    if model is None:
        pytest.skip(f"no small model on this machine: set ODA_GPU_MODEL to a local model folder, "
                    f"or put {SMALL_MODEL} in the Hugging Face cache (the tests download "
                    f"nothing)")  # fmt: skip
    tmp = tmp_path_factory.mktemp("vllm")
    port = free_port()
    args = [a for a in _chart_vllm_args(tmp, model)
            if not a.startswith(("--host=", "--port="))]  # fmt: skip
    argv = [binary, "serve", *args, "--host=127.0.0.1", f"--port={port}"]
    log = tmp / "vllm.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"vllm exited: {log.read_text()[-3000:]}")
            return _healthy(url)

        wait_for(up, timeout=1200, what="vLLM's /health", every=2)
        yield f"{url}/v1"
    finally:
        stop_process(proc, grace_s=30)


def test_one_model_backed_question_through_vllm(vllm_server: str, sample_lake: Path,
                                                tmp_path: Path) -> None:  # fmt: skip
    from devset import oracle  # noqa: PLC0415 (bench/ joins sys.path in the e2e conftest)

    item = next(i for i in retrieval_eval.load_items() if i.id == "P06")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ODA_")}
    env = {**clean, "ODA_LAKE": str(sample_lake), "ODA_DATA_DIR": str(tmp_path / "data"),
           "ODA_LLM_BASE_URL": vllm_server, "ODA_LLM_MODEL": "small", "ODA_LLM_FORCE": "time",
           "HF_HUB_OFFLINE": "1"}  # fmt: skip
    done = subprocess.run([*cli_command(), "ask", item.text, "--json", "--quiet",
                           "--as-of", "2022-06-15T00:00:00Z"], capture_output=True, text=True,
                          env=env, timeout=1200, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    body: dict[str, Any] = json.loads(done.stdout)
    answer = AnswerPayload.model_validate(body)
    asked = {stage: t for stage, t in (answer.tokens or {}).items()
             if t.get("prompt_tokens", 0) > 0}  # fmt: skip
    assert asked, f"no stage asked the model: {answer.tokens} {answer.warnings}"
    verdict = retrieval_eval.check_answer(answer, item.expect, sample_lake,
                                          oracle.jobs(sample_lake))  # fmt: skip
    assert verdict.ok, verdict.reason
