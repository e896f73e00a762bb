"""A run's result as text for people (the CLI without ``--json``)."""

from __future__ import annotations

from pathlib import Path

from oda_analyst.codeagent.result import RunResult


def render_result(result: RunResult, out_dir: Path | None = None) -> str:
    lines = []
    for finding in result.audit:
        lines.append(f"audit {finding.severity}: {finding.message}")
    if result.stdout:
        lines.append(result.stdout.rstrip("\n"))
    if result.stderr:
        lines.append("--- stderr ---")
        lines.append(result.stderr.rstrip("\n"))
    where = f" in {out_dir}" if out_dir is not None else " (pass --out DIR to keep them)"
    for produced in result.files:
        lines.append(f"file {produced.name} ({produced.bytes:,} bytes){where}")
    code = "-" if result.exit_code is None else str(result.exit_code)
    lines.append(
        f"status {result.status} exit {code} backend {result.backend} "
        f"{result.duration_s:.2f} s" + (f": {result.note}" if result.note else "")
    )
    return "\n".join(lines)
