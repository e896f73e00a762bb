"""One script, start to end, for ``oda-analyst code run``: a throw-away workspace per run."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from oda_analyst.codeagent.limits import Limits
from oda_analyst.codeagent.result import RunResult
from oda_analyst.codeagent.runner import execute
from oda_analyst.codeagent.workspace import Workspace, safe_name
from oda_analyst.errors import UsageError

EXIT_CODES = {"ok": 0, "refused": 4, "error": 1, "timeout": 1, "killed": 1}


def run_file(
    script: Path,
    *,
    user: str,
    inputs: Sequence[Path] = (),
    out_dir: Path | None = None,
    backend: str = "auto",
    limits: Limits | None = None,
    work_root: Path,
) -> RunResult:
    """Run ``script`` with ``inputs`` in /in; copy what it leaves in /out to ``out_dir``."""
    try:
        source = script.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {script}: {exc}", hint="pass a UTF-8 Python file") from None
    for path in inputs:
        if not path.is_file():
            raise UsageError(f"--input {path} is not a file", hint="pass files, not folders")
        safe_name(path.name)
    ws = Workspace(work_root / safe_name(user) / f"run-{uuid.uuid4().hex[:12]}")
    try:
        for path in inputs:
            ws.add(path)
        result = execute(source, ws, backend=backend, limits=limits)
        if out_dir is not None and result.files:
            out_dir.mkdir(parents=True, exist_ok=True)
            for produced in result.files:
                data = ws.read_output(produced.name, max_bytes=result.limits.out_dir_bytes)
                (out_dir / produced.name).write_bytes(data)
        return result
    finally:
        ws.destroy()
        shutil.rmtree(ws.root, ignore_errors=True)
