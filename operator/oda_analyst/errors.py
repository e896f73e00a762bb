"""One small hierarchy of typed errors.

Every error carries a message that says what went wrong and a hint that says what the user can
do about it; the CLI maps the class to an exit code (DESIGN.md: 1 failed, 2 usage/config error,
4 rejected) and never shows a traceback for these.
"""

from __future__ import annotations


class OdaError(Exception):
    """Base of every error ODA Analyst raises on purpose."""

    exit_code = 1
    code = "oda_error"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


class UsageError(OdaError):
    """A command-line argument or a request field is malformed."""

    exit_code = 2
    code = "usage_error"


class ConfigError(OdaError):
    """A setting is missing or invalid (environment variable, option or file)."""

    exit_code = 2
    code = "config_error"


class LakeError(OdaError):
    """The Parquet lake cannot be read or written as asked."""

    code = "lake_error"


class LakeNotFoundError(LakeError):
    """The lake location does not exist or holds no M100-shaped partitions."""

    code = "lake_not_found"


class OntologyError(OdaError):
    """The ontology, the shapes or the metric catalogue cannot be loaded or are inconsistent."""

    code = "ontology_error"


class VKGBuildError(OdaError):
    """Building a per-query knowledge graph failed (deterministic, not retried)."""

    code = "vkg_build_error"


class StoreError(OdaError):
    """The graph store or SPARQL endpoint failed."""

    code = "store_error"


class AccessDeniedError(OdaError):
    """The user is not allowed to read this resource (a usage error: ask for your own)."""

    exit_code = 2
    code = "access_denied"


class QueryRejectedError(OdaError):
    """A request or a query was rejected before execution (ontology violation, bad input)."""

    exit_code = 4
    code = "rejected"


class BusyError(OdaError):
    """The server holds as many requests as it may; the message says when to retry."""

    code = "busy"


class RequestTimeoutError(OdaError):
    """A request ran longer than its time limit and was stopped."""

    code = "timeout"


class RequestCancelledError(OdaError):
    """A request was stopped because its caller went away or its time limit passed."""

    code = "cancelled"


class SandboxError(OdaError):
    """The code agent could not run code as asked (sandbox failure, bad upload, no session)."""

    code = "sandbox_error"


class SandboxUnavailableError(SandboxError):
    """No sandbox can run here (neither runsc nor bwrap, or no sandbox Python environment)."""

    exit_code = 2
    code = "sandbox_unavailable"
