"""The ``oda-analyst`` command line.

Thin: each command parses its options, calls one function of the package and prints the result.
Errors of the OdaError family become a two-line message (what, and what to do) and the exit code
of their class; nothing of ours ends in a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from oda_analyst import __version__
from oda_analyst.config import describe_settings, load_settings
from oda_analyst.errors import OdaError, UsageError
from oda_analyst.render import render_answer

F = TypeVar("F", bound=Callable[..., Any])

_HELP = f"""ODA Analyst: ask operational telemetry questions in plain language.

\b
Configuration (environment variables):
{describe_settings()}
"""


def _fail(err: OdaError) -> None:
    click.echo(f"error: {err.message}", err=True)
    if err.hint:
        click.echo(f"hint: {err.hint}", err=True)
    sys.exit(err.exit_code)


def handle_errors(func: F) -> F:
    """Turn OdaError into a clear message and its exit code."""
    import functools

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OdaError as err:
            _fail(err)

    return wrapper  # type: ignore[return-value]


def _backend_option(help_text: str) -> Callable[[F], F]:
    """``--backend nsa|sota1|sota2``: who retrieves (ours by default, or a paper baseline)."""
    return click.option(
        "--backend",
        type=click.Choice(["nsa", "sota1", "sota2"]),
        default="nsa",
        help=help_text,
    )


@click.group(help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="oda-analyst")
def main() -> None:
    """Entry point of the console script."""


@main.group()
def lake() -> None:
    """Generate and inspect Parquet lakes in the M100 ExaData layout."""


class _Progress:
    """Progress on stderr: one rewritten line on a terminal, a line per partition otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, event: Any) -> None:
        text = f"[{event.done:>4}/{event.total}] {event.label:<60.60} {event.rows_total:>13,} rows"
        if self.tty:
            click.echo("\r" + text, nl=False, err=True)
        else:
            click.echo(text, err=True)

    def close(self) -> None:
        if self.tty:
            click.echo("", err=True)


@lake.command("generate")
@click.option(
    "--profile", default=None, help="Named profile: sample, month, tiny or demo (default demo)."
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder (default: ODA_LAKE, else <ODA_DATA_DIR>/lake).",
)
@click.option("--start", default=None, help="Window start, ISO 8601 (UTC if no offset).")
@click.option("--end", default=None, help="Window end (exclusive), ISO 8601.")
@click.option("--nodes", default=None, help="Node ids for node-level plugins, e.g. 0-9,900,920.")
@click.option("--plugins", default=None, help="Plugins, e.g. ipmi,ganglia,job_table.")
@click.option("--metrics", default=None, help="Metrics, e.g. total_power,Gpu0_gpu_utilization.")
@click.option("--seed", type=int, default=None, help="Random seed (default 2022).")
@click.option("--quiet", is_flag=True, help="No progress display.")
@handle_errors
def lake_generate(
    profile: str | None,
    out: Path | None,
    start: str | None,
    end: str | None,
    nodes: str | None,
    plugins: str | None,
    metrics: str | None,
    seed: int | None,
    quiet: bool,
) -> None:
    """Write a synthetic, physically coherent M100-shaped lake."""
    from oda_analyst.lake.synth import build_spec, generate

    spec = build_spec(
        profile, start=start, end=end, nodes=nodes, plugins=plugins, metrics=metrics, seed=seed
    )
    target = out or Path(load_settings().lake_location)
    progress = None if quiet else _Progress()
    try:
        report = generate(spec, target, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    click.echo(
        f"wrote {report.partitions} partitions, {report.rows:,} rows, "
        f"{report.bytes / 2**20:,.1f} MiB to {report.path} in {report.seconds:.1f} s"
    )


@lake.command("describe")
@click.option(
    "--lake",
    "location",
    default=None,
    help="Lake folder or s3:// URI (default: ODA_LAKE, else <ODA_DATA_DIR>/lake).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@handle_errors
def lake_describe(location: str | None, as_json: bool) -> None:
    """Print the plugins, metrics, months, rows and bytes of a lake."""
    from oda_analyst.lake.reader import Lake, format_description

    settings = load_settings()
    lk = Lake(location, settings.storage_options()) if location else Lake.from_settings(settings)
    desc = lk.describe()
    if as_json:
        click.echo(json.dumps(desc.to_dict(), indent=2))
    else:
        click.echo(format_description(desc))


def _parse_as_of(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--as-of {value!r} is not an ISO 8601 time", hint="e.g. --as-of 2022-06-02T00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _print_answer(payload: Any, as_json: bool) -> None:
    if as_json:
        click.echo(payload.model_dump_json(indent=2))
    else:
        click.echo(render_answer(payload))
    sys.exit(payload.exit_code)


def _progress(quiet: bool) -> Callable[[str], None]:
    def show(message: str) -> None:
        if not quiet:
            click.echo(f"… {message}", err=True)

    return show


@main.command("ask")
@click.argument("question")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@click.option(
    "--as-of",
    "as_of",
    default=None,
    help="Reference time for relative windows ('last 10 hours'), ISO 8601; default now.",
)
@click.option("--user", default=None, help="Who asks (default: $USER).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder for the charts (default: <ODA_DATA_DIR>/requests/<request id>).",
)
@click.option("--quiet", is_flag=True, help="No progress display.")
@_backend_option(
    "Who retrieves: nsa (ours, default), sota1 (EXASAGE Query Tool baseline) or sota2 "
    "(Datalake Query Tool baseline); the charts and statistics follow in every case."
)
@handle_errors
def ask(
    question: str,
    as_json: bool,
    as_of: str | None,
    user: str | None,
    out_dir: Path | None,
    quiet: bool,
    backend: str,
) -> None:
    """Ask a question: retrieval, then the charts or statistics it asks for; exit 0 completed,
    3 clarification, 4 rejected, 1 failed. Progress goes to stderr. With a baseline backend
    (``--backend sota1|sota2``) the coordinator retrieves through that tool's MCP server
    instead of ours (the paper's configurations); the code step is the same."""
    import asyncio

    from oda_analyst.analyst import build_coordinator

    coordinator = build_coordinator(load_settings(), backend=backend)
    answer = asyncio.run(
        coordinator.ask(question, user=user or _default_user(), as_of=_parse_as_of(as_of),
                        out_dir=out_dir, progress=_progress(quiet))
    )  # fmt: skip
    _print_analysis(answer, as_json)


def _print_analysis(answer: Any, as_json: bool) -> None:
    from oda_analyst.render import render_analysis

    click.echo(answer.model_dump_json(indent=2) if as_json else render_analysis(answer))
    if answer.status in ("failed", "rejected") and answer.error:
        # what went wrong and what to do, on stderr as every other command says it
        click.echo(f"error: {answer.error.get('message', answer.summary)}", err=True)
        if answer.error.get("hint"):
            click.echo(f"hint: {answer.error['hint']}", err=True)
    sys.exit(answer.exit_code)


@main.command("clarify")
@click.argument("request_id")
@click.argument("answer")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@click.option("--user", default=None, help="Who asks (default: $USER).")
@click.option("--quiet", is_flag=True, help="No progress display.")
@handle_errors
def clarify(request_id: str, answer: str, as_json: bool, user: str | None, quiet: bool) -> None:
    """Answer the clarification a request asked and resume it where it stopped."""
    import asyncio

    from oda_analyst.analyst import build_coordinator
    from oda_analyst.retriever.service import Retriever

    settings = load_settings()
    coordinator = build_coordinator(settings)
    if asyncio.run(coordinator.pending(request_id)) is not None:  # `ask` started it: resume
        backend = asyncio.run(coordinator.backend_of(request_id)) or "nsa"
        if backend != "nsa":  # back to the server that started it
            coordinator = build_coordinator(settings, backend=backend)
        resumed = asyncio.run(
            coordinator.clarify(request_id, answer, user=user or _default_user(),
                                progress=_progress(quiet))
        )  # fmt: skip
        _print_analysis(resumed, as_json)
    retriever = Retriever(settings)
    payload = retriever.clarify(request_id, answer, user=user or _default_user(),
                                progress=_progress(quiet or as_json))  # fmt: skip
    _print_answer(payload, as_json)


REPLAY_CHANGED = 5
"""``replay``'s exit code when a figure changed (0: every figure unchanged)."""


@main.command("replay")
@click.argument("request_id")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--user", default=None, help="Who asks (default: $USER).")
@handle_errors
def replay_request(request_id: str, as_json: bool, user: str | None) -> None:
    """Re-run a completed request on the lake as it is now: exit 0 when every figure is
    unchanged, 5 when one changed (the report names the partitions rewritten and the figures)."""
    import asyncio

    from oda_analyst.analyst import build_coordinator
    from oda_analyst.retriever.replay import render_report, replay
    from oda_analyst.retriever.service import Retriever

    settings = load_settings()
    coordinator = build_coordinator(settings)
    backend = asyncio.run(coordinator.backend_of(request_id)) or "nsa"
    if backend != "nsa":
        raise UsageError(
            f"request {request_id} was retrieved by the {backend} baseline, which keeps no "
            "provenance, so it cannot be replayed",
            hint="replay answers of our analyst (ask --backend nsa)",
        )
    # `ask` prints the coordinator's request id; the figures are its retrieval's
    behind = asyncio.run(coordinator.retrieval_request(request_id))
    report = replay(Retriever(settings), behind or request_id, user=user or _default_user())
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        click.echo(render_report(report))
    sys.exit(0 if report.unchanged else REPLAY_CHANGED)


@main.command("csv")
@click.argument("handle")
@click.option("--user", default=None, help="Who asks (default: $USER).")
@handle_errors
def csv_path(handle: str, user: str | None) -> None:
    """Print the path of a large result's CSV file, by the handle an answer gave."""
    from oda_analyst.retriever.service import Retriever

    click.echo(str(Retriever(load_settings()).download_csv(handle, user=user or _default_user())))


@main.command("metrics")
@click.option("--plugin", default=None, help="Only this plugin's metrics.")
@click.argument("search", required=False)
@handle_errors
def metrics(plugin: str | None, search: str | None) -> None:
    """List catalogue metrics (name, plugin, unit, the lake's months of it, description),
    optionally filtered by text. A metric the lake does not hold shows '-' as its months."""
    from oda_analyst.errors import LakeError
    from oda_analyst.lake import Lake
    from oda_analyst.ontology.catalogue import load_catalogue

    cat = load_catalogue()
    held: dict[tuple[str, str], tuple[str, ...]] | None
    try:
        held = Lake.from_settings(load_settings()).metric_months()
    except LakeError as err:  # no lake yet: the catalogue alone, and say so
        held = None
        click.echo(f"note: months not shown: {err.message}", err=True)
    entries = cat.by_plugin(plugin) if plugin else list(cat)
    needle = (search or "").lower()
    shown = 0
    for info in entries:
        text = " ".join((info.name, info.description, *info.synonyms)).lower()
        if needle and needle not in text:
            continue
        shown += 1
        months = "" if held is None else _months_text(held.get((info.plugin, info.name), ()))
        click.echo(f"{info.name:<42} {info.plugin:<9} {info.unit:<8} {months}{info.description}")
    if not shown:
        raise UsageError(f"no metric matches {search!r}", hint="try a shorter word, e.g. 'temp'")


def _months_text(months: tuple[str, ...]) -> str:
    """'22-05..22-06 ' (fixed width), '-' when the lake lacks the metric."""
    text = "-" if not months else months[0] if len(months) == 1 else f"{months[0]}..{months[-1]}"
    return f"{text:<13}"


def _mcp_options(default_port: int) -> Callable[[F], F]:
    """The options every MCP server command takes: transport, host and port."""

    def wrap(func: F) -> F:
        func = click.option("--port", type=int, default=default_port, help="HTTP port.")(func)
        func = click.option("--host", default="127.0.0.1", help="HTTP bind address.")(func)
        return click.option(
            "--transport",
            type=click.Choice(["stdio", "http"]),
            default="stdio",
            help="stdio (default) or streamable HTTP.",
        )(func)

    return wrap


def _serve(server: Any, transport: str, host: str, port: int) -> None:
    if transport == "stdio":
        server.run(transport="stdio", show_banner=False)
    else:
        from oda_analyst.mcptools import http_middleware

        server.run(transport="http", host=host, port=port, show_banner=False,
                   middleware=http_middleware(host))  # fmt: skip


@main.command("mcp")
@_mcp_options(8765)
@_backend_option(
    "Whose tools: nsa (our retriever, default), sota1 (EXASAGE Query Tool baseline) or sota2 "
    "(Datalake Query Tool baseline, with its list_plugins/list_metrics/describe_metric/"
    "run_query)."
)
@handle_errors
def mcp_serve(transport: str, host: str, port: int, backend: str) -> None:
    """Serve the retriever's MCP tools (query, clarify, download_csv, status, replay), or a
    paper baseline's with the same interface (--backend); over HTTP also GET /healthz."""
    from oda_analyst.backends import mcp_server

    _serve(mcp_server(backend), transport, host, port)


@main.group("code")
def code() -> None:
    """Run analysis code in a sandbox (the Deep Code Agent)."""


@code.command("run")
@click.argument("script", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--user", default=None, help="Whose sandbox (default: $USER).")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A file to put in /in (repeatable).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Copy the files left in /out here.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "gvisor", "bwrap"]),
    default="auto",
    help="Sandbox: auto (gvisor, then bwrap), gvisor or bwrap; never unsandboxed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@handle_errors
def code_run(
    script: Path,
    user: str | None,
    inputs: tuple[Path, ...],
    out_dir: Path | None,
    backend: str,
    as_json: bool,
) -> None:
    """Audit SCRIPT, run it in a sandbox; exit 0 ok, 4 refused, 1 error/timeout/killed."""
    from oda_analyst.codeagent.oneshot import EXIT_CODES, run_file
    from oda_analyst.codeagent.render import render_result

    result = run_file(
        script,
        user=user or _default_user(),
        inputs=inputs,
        out_dir=out_dir,
        backend=backend,
        work_root=load_settings().data_dir / "codeagent",
    )
    click.echo(result.model_dump_json(indent=2) if as_json else render_result(result, out_dir))
    sys.exit(EXIT_CODES[result.status])


@code.command("mcp")
@_mcp_options(8766)
@handle_errors
def code_mcp(transport: str, host: str, port: int) -> None:
    """Serve the code agent's MCP tools (codeagent_init … codeagent_stop)."""
    from oda_analyst.codeagent.mcp_server import mcp as code_server

    _serve(code_server, transport, host, port)


@main.command("chat")
@click.option("--user", default=None, help="Who asks (default: $USER).")
@click.option(
    "--as-of", "as_of", default=None, help="Reference time for relative windows, ISO 8601."
)
@click.option("--quiet", is_flag=True, help="No progress display.")
@_backend_option(
    "Who retrieves: nsa (ours, default), sota1 or sota2 (the paper's baselines, which never "
    "ask back: a question they cannot read is refused)."
)
@handle_errors
def chat(user: str | None, as_of: str | None, quiet: bool, backend: str) -> None:
    """An interactive session: ask questions one per line, answer clarifications inline
    (an empty line or 'quit' ends it). One conversation: the recent turns are kept."""
    import asyncio

    from oda_analyst.analyst import build_coordinator
    from oda_analyst.render import render_analysis

    coordinator = build_coordinator(load_settings(), backend=backend)
    who, moment = user or _default_user(), _parse_as_of(as_of)
    conversation = f"chat-{os.getpid()}-{int(datetime.now(UTC).timestamp())}"
    click.echo("Ask about the telemetry (empty line or 'quit' to stop).", err=True)
    while True:
        question = click.prompt("you", default="", show_default=False, err=True).strip()
        if not question or question.lower() in {"quit", "exit"}:
            return
        try:
            answer = asyncio.run(
                coordinator.ask(question, user=who, as_of=moment, conversation_id=conversation,
                                progress=_progress(quiet))
            )  # fmt: skip
            while answer.status == "clarification":
                click.echo(render_analysis(answer).rsplit("\nanswer with:", 1)[0])
                reply = click.prompt("your answer", default="", show_default=False, err=True)
                if not reply.strip():
                    break
                answer = asyncio.run(
                    coordinator.clarify(conversation, reply, user=who, progress=_progress(quiet))
                )
            click.echo(render_analysis(answer))
        except OdaError as err:  # one bad question does not end the session
            click.echo(f"error: {err.message}", err=True)
            if err.hint:
                click.echo(f"hint: {err.hint}", err=True)


@main.command("serve")
@click.option("--host", default="127.0.0.1", help="Bind address of all three endpoints.")
@click.option("--retriever-port", type=int, default=8765, help="The retriever's MCP (HTTP).")
@click.option("--codeagent-port", type=int, default=8766, help="The code agent's MCP (HTTP).")
@click.option("--metrics-port", type=int, default=9464, help="Prometheus /metrics.")
@click.option(
    "--pipeline-port",
    type=int,
    default=None,
    help="Also serve the operator's pipeline port (HTTP) here: stage 1, answers and the "
    "coordinator for AnalystQueries, whose scripts run in the users' sandbox pods (needs "
    "Kubernetes credentials: in-cluster, or KUBECONFIG).",
)
@_backend_option(
    "Whose retrieval tools the retriever port serves: nsa (ours, default), sota1 or sota2 "
    "(a paper baseline; point ODA_SOTA1_MCP_URL / ODA_SOTA2_MCP_URL at it)."
)
@handle_errors
def serve(host: str, retriever_port: int, codeagent_port: int, metrics_port: int,
          pipeline_port: int | None, backend: str) -> None:  # fmt: skip
    """Run the retriever's and the code agent's MCP servers (streamable HTTP at /mcp) and a
    Prometheus /metrics endpoint, for other MCP hosts (ODA_RETRIEVER_MCP_URL and
    ODA_CODEAGENT_MCP_URL of another `oda-analyst`) and for monitoring; with --pipeline-port,
    the pipeline the operator drives as well (the analyst Deployment of the chart)."""
    from oda_analyst.serve import serve_all

    serve_all(host, retriever_port, codeagent_port, metrics_port, backend=backend,
              pipeline_port=pipeline_port)  # fmt: skip


@main.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def doctor(as_json: bool) -> None:
    """Check the configured model server: does it answer, its context window, which
    structured-output form it takes. Exit 0 usable (or none configured), 1 not usable."""
    from oda_analyst.llm.doctor import diagnose

    report = diagnose(load_settings())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo("\n".join(report.lines()))
    sys.exit(0 if report.usable or not report.configured else 1)


@main.command("ui")
@click.option("--host", default="127.0.0.1", help="Bind address.")
@click.option("--port", type=int, default=8000, help="HTTP port.")
@handle_errors
def ui(host: str, port: int) -> None:
    """Serve the web UI: sign-in, per-user conversations, answers with plots, SPARQL and
    feedback (users from ODA_UI_USERS_FILE / ODA_UI_USERS)."""
    from oda_analyst.webui.serve import serve_ui

    settings = load_settings()
    serve_ui(settings, host, port, reference=settings.ui_reference_time)


@main.command("ui-hash-password")
@click.option("--user", required=True, help="The user name of the entry.")
@click.password_option(help="The password (prompted, twice, when not given).")
def ui_hash_password(user: str, password: str) -> None:
    """Print a 'user:<argon2 hash>' line for ODA_UI_USERS_FILE."""
    from oda_analyst.webui.auth import hash_password

    click.echo(f"{user}:{hash_password(password)}")


def _default_user() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or "anonymous"


if __name__ == "__main__":  # pragma: no cover
    main()
