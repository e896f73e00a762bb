"""What one execution returns: the CLI's ``--json`` object and the MCP tool's result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from oda_analyst.codeagent.limits import Limits

Status = Literal["ok", "refused", "error", "timeout", "killed"]
Severity = Literal["high", "medium"]


class Finding(BaseModel):
    """One thing the static auditor noticed."""

    severity: Severity
    line: int
    col: int
    rule: str = Field(description="What kind of risk: import, call, attribute, open, builtin.")
    message: str = Field(description="What was found and what to do instead.")


class ProducedFile(BaseModel):
    """A file the code left in /out."""

    name: str
    bytes: int
    media_type: str


class RunResult(BaseModel):
    """The outcome of auditing and running one script."""

    status: Status
    exit_code: int | None = Field(description="The script's exit status; null when it never ran.")
    stdout: str = ""
    stderr: str = ""
    files: list[ProducedFile] = Field(default_factory=list)
    audit: list[Finding] = Field(default_factory=list)
    backend: str
    limits: Limits
    duration_s: float = 0.0
    note: str | None = Field(
        default=None, description="Why a run was refused, timed out or killed."
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"
