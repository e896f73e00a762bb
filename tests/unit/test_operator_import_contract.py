"""The import contract that keeps pipeline code out of the operator's process holds, and fails
on an import planted into a controller module (an existing one, and one added later), through
lint-imports itself on a copy of the package: the contract is only worth what it catches."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACT = "operator-orchestrates"
NAME = "The operator orchestrates"

pytestmark = pytest.mark.slow


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the repository's contracts on the package under ``root``."""
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(lint), str(REPO / "pyproject.toml"), "--contract", CONTRACT,
                           "--no-cache"], cwd=root, capture_output=True, text=True,
                          env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(root)},
                          check=False, timeout=600)  # fmt: skip


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "operator" / "oda_analyst", tmp_path / "oda_analyst",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    return tmp_path


def test_the_operator_imports_no_pipeline_code(package: Path) -> None:
    done = _lint(package)
    assert done.returncode == 0, done.stdout + done.stderr
    assert NAME in done.stdout and "KEPT" in done.stdout


@pytest.mark.parametrize(("module", "planted"), [
    ("status.py", "from oda_analyst.lake import Lake"),
    ("reconcile_query.py", "from oda_analyst.retriever.service import Retriever"),
    ("handlers.py", "from oda_analyst.vkg.builder import build_vkg"),
    ("planted_later.py", "from oda_analyst.pipeline.local import LocalPipeline"),
    ("pods.py", "import oda_analyst.codeagent.limits"),
])  # fmt: skip
def test_an_import_planted_in_any_controller_module_breaks_the_contract(
    package: Path, module: str, planted: str
) -> None:
    path = package / "oda_analyst" / "controller" / module
    before = path.read_text() if path.exists() else '"""Added after the contract."""\n'
    path.write_text(before + f"\n{planted}  # noqa\n")
    done = _lint(package)
    assert done.returncode != 0, done.stdout
    assert NAME in done.stdout and "BROKEN" in done.stdout
    dotted = "oda_analyst.controller." + module.removesuffix(".py").replace("/", ".")
    assert dotted in done.stdout, done.stdout


FORBIDDEN = ("lake", "vkg", "sparql", "retriever", "coordinator", "codeagent", "ontology",
             "reading", "baselines", "backends", "analyst", "llm", "pipeline")  # fmt: skip


def test_the_operator_process_loads_no_pipeline_code() -> None:
    """What `kopf run -m oda_analyst.controller.handlers` loads, in a fresh interpreter: none of
    the pipeline's packages (an import the contract cannot see, by importlib, would show)."""
    probe = (
        "import sys, oda_analyst.controller.handlers, oda_analyst.controller.webhooks; "
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('oda_analyst.'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "operator"), "HOME": "/tmp"},
                          check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = done.stdout.split()
    assert "oda_analyst.controller.port_http" in loaded
    leaked = [m for m in loaded if m.split(".")[1] in FORBIDDEN]
    assert not leaked, leaked
