"""The sandbox's Python environment: a virtual environment apart from the project's own.

It holds the paper's data-science libraries and nothing of ODA Analyst. It is built once per key
(the requirements file, the base interpreter's version and location) under
``<cache>/sandbox-env/<key>/`` and mounted read-only into every sandbox, at the same path, together
with the base interpreter's prefix. Building needs the package index; running never does.

    python -m oda_analyst.codeagent.pyenv build [--cache DIR]   # what scripts/setup_test.sh runs
    python -m oda_analyst.codeagent.pyenv path  [--cache DIR]   # print the folder, or fail

A sandbox that finds none builds it on its first use (``ensure``), saying so on stderr: the main
job's set-up does not build what only a chart answer or `code run` needs.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from oda_analyst.config import get_settings
from oda_analyst.errors import SandboxUnavailableError

REQUIREMENTS = "sandbox-requirements.txt"
READY = ".oda-ready"


def requirements_text() -> str:
    return resources.files("oda_analyst.codeagent").joinpath(REQUIREMENTS).read_text("utf-8")


def env_key(python: str | None = None) -> str:
    """Key of the environment: the requirements and the base interpreter it is built from."""
    exe = python or sys.executable
    base = _base_prefix(exe)
    digest = hashlib.sha256(f"{requirements_text()}\n{sys.version}\n{base}".encode())
    return digest.hexdigest()[:16]


def _base_prefix(python: str) -> str:
    if python == sys.executable:
        return sys.base_prefix
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


@dataclass(frozen=True)
class SandboxEnv:
    """A built environment: where it is and what must be mounted for it to run."""

    root: Path
    base_prefix: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def mpl_cache(self) -> Path:
        """Matplotlib's font cache, built with the environment (copied to /tmp at start)."""
        return self.root / "mplcache"

    def mounts(self) -> list[Path]:
        """Host folders to mount read-only at the same path: the venv and the interpreter."""
        paths = [self.root]
        if not _under(self.base_prefix, Path("/usr")):
            paths.append(self.base_prefix)
        return paths


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def default_cache() -> Path:
    return Path(os.environ.get("ODA_CACHE") or get_settings().cache_dir)


def env_dir(cache: Path | None = None) -> Path:
    return (cache or default_cache()) / "sandbox-env" / env_key()


def locate(cache: Path | None = None) -> SandboxEnv:
    """The built environment, or SandboxUnavailableError saying how to build it."""
    root = env_dir(cache)
    marker = root / READY
    if not marker.is_file():
        raise SandboxUnavailableError(
            f"the sandbox's Python environment is not built ({root})",
            hint="run `python -m oda_analyst.codeagent.pyenv build` (or `. scripts/setup_test.sh`)",
        )
    info = json.loads(marker.read_text("utf-8"))
    return SandboxEnv(root=root, base_prefix=Path(info["base_prefix"]))


def build(cache: Path | None = None, *, quiet: bool = True) -> SandboxEnv:
    """Build the environment unless it exists (idempotent; a half-built one is rebuilt)."""
    root = env_dir(cache)
    if (root / READY).is_file():
        return locate(cache)
    # Built at its final path (a venv is not relocatable); the marker is written last, so a
    # half-built one is never used and is rebuilt from scratch.
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    req = root / "requirements.txt"
    req.write_text(requirements_text(), "utf-8")
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "--no-input"]
    subprocess.run([*pip, *(["-q"] if quiet else []), "-r", str(req)], check=True)
    mpl = root / "mplcache"
    mpl.mkdir(exist_ok=True)
    # Build matplotlib's font list now, so a sandbox (read-only venv) never rebuilds it.
    subprocess.run(
        [
            str(root / "bin" / "python"),
            "-c",
            "import matplotlib.font_manager as f; f.fontManager.findfont('DejaVu Sans')",
        ],
        check=True,
        env={**os.environ, "MPLCONFIGDIR": str(mpl)},
    )
    info = {"base_prefix": sys.base_prefix, "python": sys.version.split()[0]}
    (root / READY).write_text(json.dumps(info), "utf-8")
    return locate(cache)


def ensure(cache: Path | None = None) -> SandboxEnv:
    """The environment, built now (once, with a progress line on stderr) when it is not yet.
    Two processes building at once wait for one build."""
    try:
        return locate(cache)
    except SandboxUnavailableError:
        pass
    root = env_dir(cache)
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / READY).is_file():
            print(f"building the sandbox's Python environment once (about a minute): {root}",
                  file=sys.stderr, flush=True)  # fmt: skip
        try:
            return build(cache, quiet=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SandboxUnavailableError(
                f"the sandbox's Python environment could not be built ({exc})",
                hint="check that the package index is reachable, then run "
                "`python -m oda_analyst.codeagent.pyenv build`",
            ) from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oda_analyst.codeagent.pyenv")
    parser.add_argument("action", choices=["build", "path"])
    parser.add_argument(
        "--cache", type=Path, default=None, help="Cache folder (default ODA_CACHE)."
    )
    args = parser.parse_args(argv)
    try:
        # 'build' takes the same lock as a first use (``ensure``): a set-up and a first `code
        # run` at once would otherwise each delete the other's half-built folder.
        env = ensure(args.cache) if args.action == "build" else locate(args.cache)
    except SandboxUnavailableError as err:
        print(f"error: {err.message}\nhint: {err.hint}", file=sys.stderr)
        return 2
    print(env.root)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
