"""One settings object for the whole product, read from the environment (prefix ``ODA_``).

Fields are validated when the object is built, so a bad value fails at start-up with a message
naming the variable, not deep inside a request.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from oda_analyst.errors import ConfigError

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "oda-analyst"


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "oda-analyst"


def _default_ontology_dir() -> Path:
    return _REPO_ROOT / "ontology"


class Settings(BaseSettings):
    """Settings of ODA Analyst. Each field is read from ``ODA_<FIELD NAME IN CAPITALS>``."""

    model_config = SettingsConfigDict(env_prefix="ODA_", extra="ignore", frozen=True)

    lake: str = Field(
        default="",
        description="The Parquet lake in the M100 ExaData layout: a local folder or an s3:// URI "
        "(s3://bucket/prefix). Empty means <data_dir>/lake.",
    )
    s3_endpoint: str | None = Field(
        default=None,
        description="S3/MinIO endpoint URL for an s3:// lake, e.g. http://minio:9000.",
    )
    s3_access_key: str | None = Field(default=None, description="S3/MinIO access key.")
    s3_secret_key: str | None = Field(default=None, description="S3/MinIO secret key.")
    s3_region: str = Field(default="us-east-1", description="S3 region name.")
    s3_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Longest wait for one S3/MinIO answer, seconds (3 attempts with back-off, "
        "then an error naming the endpoint).",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the graph store, caches, request state and artefacts live.",
    )
    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Derived data that any data_dir may share (embedding vectors of the "
        "catalogue, keyed by model and text hashes).",
    )
    ontology_dir: Path = Field(
        default_factory=_default_ontology_dir,
        description="Folder holding oda.ttl, shapes.ttl, metrics.yaml and examples/.",
    )
    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint (e.g. vLLM http://vllm:8000/v1). Unset: no "
        "model, the rule-based path.",
    )
    llm_model: str | None = Field(default=None, description="Model name served at llm_base_url.")
    llm_api_key: str | None = Field(default=None, description="API key for the LLM endpoint.")
    llm_timeout_s: float = Field(
        default=120.0, gt=0, description="Read timeout of one LLM call, seconds."
    )
    llm_max_retries: int = Field(
        default=3, ge=0, le=10, description="Retries of an LLM call on 429/5xx/timeouts."
    )
    llm_structured_mode: str = Field(
        default="auto",
        description="How structured outputs are requested: auto (ask the server once), "
        "response_format (OpenAI json_schema; vLLM), json_object (llama.cpp), "
        "structured_outputs (vLLM >= 0.12) or guided_json (older vLLM).",
    )
    llm_stages: str = Field(
        default="all",
        description="Model-backed stages that ask the model (comma-separated: time, intent, "
        "decompose, plugin, sparql, completeness, repair; groups grounding, review, all, "
        "none); the others run by the rules alone.",
    )
    llm_force: str = Field(
        default="",
        description="Stages that ask the model even where the rules would not need it (same "
        "names; default none): time (the parser read the window; its reading still wins), "
        "sparql (the model writes every plan's query instead of the compiler; its figures must "
        "be the plan's), repair (a "
        "repair is asked for every query). For testing the model paths; a forced stage is used.",
    )
    sparql_endpoint: str | None = Field(
        default=None,
        description="SPARQL 1.1 endpoint for the graph store (e.g. an Oxigraph server "
        "http://oxigraph:7878, GraphDB, Fuseki). Unset: embedded pyoxigraph under data_dir.",
    )
    sparql_update_url: str | None = Field(
        default=None, description="SPARQL update URL, when it is not <endpoint>/update."
    )
    sparql_gsp_url: str | None = Field(
        default=None, description="Graph Store Protocol URL, when it is not <endpoint>/store."
    )
    sparql_user: str | None = Field(default=None, description="Basic-auth user for the endpoint.")
    sparql_password: str | None = Field(
        default=None, description="Basic-auth password for the endpoint."
    )
    redis_password: str | None = Field(
        default=None,
        description="Password of the Redis at redis_url (a Kubernetes Secret gives it as its "
        "own variable, so it need not be written into the URL); a password in the URL wins.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for request checkpoints (redis://host:6379/0). Unset: embedded.",
    )
    row_limit: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Rows returned inline; larger results are written to a CSV file.",
    )
    vkg_memory_triples: int = Field(
        default=6_000_000,
        ge=10_000,
        description="Most per-query graph triples kept in memory (~350 B each); older graphs "
        "stay on disk under data_dir and reload on use.",
    )
    vkg_cache_capacity: int = Field(
        default=64, ge=1, description="Named graphs kept in the VKG cache before LRU eviction."
    )
    vkg_max_parallel_builds: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Per-query graphs of different requests built at once (the same graph is "
        "always built once, by the first request; the others wait for it).",
    )
    mcp_max_concurrent: int = Field(
        default=4, ge=1, le=256, description="MCP tool calls that run at once in one server."
    )
    mcp_max_queued: int = Field(
        default=32,
        ge=0,
        le=10_000,
        description="MCP tool calls that wait for a free slot; beyond that a call is refused at "
        "once with 'busy: … retry after N s'.",
    )
    mcp_token: str | None = Field(
        default=None,
        description="Bearer token every HTTP call to the MCP servers must carry (the chart "
        "generates one per release); the coordinator sends it. Unset: the servers serve "
        "loopback only, without a token.",
    )
    mcp_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Longest an MCP tool call may wait and run, seconds; then it is stopped "
        "with a 'timeout' error.",
    )
    store_lock_wait_s: float = Field(
        default=120.0,
        ge=0,
        description="How long a process waits for the embedded graph store that another "
        "process holds (e.g. a second `oda-analyst ask` on one data_dir), seconds; 0 fails at "
        "once.",
    )
    scan_engine: Literal["auto", "polars", "dask"] = Field(
        default="auto",
        description="Who scans and aggregates month-scale requests: polars (this process), "
        "dask (the dask_scheduler cluster), or auto (dask past dask_min_rows when a scheduler "
        "is set, else polars).",
    )
    dask_scheduler: str | None = Field(
        default=None,
        description="Dask scheduler address (tcp://host:8786, e.g. a Dask operator DaskCluster).",
    )
    dask_min_rows: int = Field(
        default=2_000_000_000,
        ge=0,
        description="Estimated rows to scan from which auto sends a request to Dask.",
    )

    trace_dir: Path | None = Field(
        default=None,
        description="Where each request's trace is written as one JSON file "
        "(<trace_id>.json). Unset: <data_dir>/traces.",
    )
    langfuse_host: str | None = Field(
        default=None,
        description="LangFuse base URL (e.g. https://cloud.langfuse.com or a self-hosted "
        "http://langfuse:3000): spans are also exported there over OTLP/HTTP. Unset: the "
        "trace file only.",
    )
    langfuse_public_key: str | None = Field(
        default=None, description="LangFuse project public key (pk-lf-…), the basic-auth user."
    )
    langfuse_secret_key: str | None = Field(
        default=None,
        description="LangFuse project secret key (sk-lf-…), the basic-auth password.",
    )
    retriever_mcp_url: str | None = Field(
        default=None,
        description="The retriever's MCP endpoint for the coordinator (streamable HTTP, e.g. "
        "http://retriever:8765/mcp). Unset: the retriever runs in-process.",
    )
    codeagent_mcp_url: str | None = Field(
        default=None,
        description="The code agent's MCP endpoint for the coordinator (e.g. "
        "http://codeagent:8766/mcp). Unset: the code agent runs in-process.",
    )
    sota1_mcp_url: str | None = Field(
        default=None,
        description="The SoTA#1 baseline's MCP endpoint for `--backend sota1` (`oda-analyst "
        "mcp --backend sota1 --transport http`, e.g. http://127.0.0.1:8767/mcp). Unset: "
        "in-process.",
    )
    sota2_mcp_url: str | None = Field(
        default=None,
        description="The SoTA#2 baseline's MCP endpoint for `--backend sota2` (as "
        "ODA_SOTA1_MCP_URL). Unset: in-process.",
    )
    coordinator_max_dispatches: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="Subagent tool calls one request may make (a bound against runaway plans; "
        "each CSV page, upload and execution counts).",
    )
    coordinator_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times a failed dispatch is retried (a busy or timed-out server, or a "
        "request refined from the error) before the failure is reported.",
    )
    pushdown_min_readings: int = Field(
        default=1_000_000,
        ge=0,
        description="Estimated readings from which a plan whose form allows it (one statistic "
        "per rack, node or GPU and day) is answered from aggregates pushed down into the lake "
        "scan instead of a graph of readings; 0 = always.",
    )
    # --- the Kubernetes operator (oda_analyst.controller) -----------------------------------
    operator_bucket: str = Field(
        default="oda-analyst",
        description="Bucket (on s3_endpoint) where the operator writes each AnalystQuery's "
        "artefacts: answer.json, result.csv and the analysis' charts.",
    )
    operator_image: str = Field(
        default="oda-analyst/analyst:0.1.0",
        description="Image of the operator's own workload (the VKG builder Job).",
    )
    operator_sandbox_image: str = Field(
        default="oda-analyst/sandbox:0.1.0",
        description="Image of the user's analysis sandbox pod (under operator_runtime_class).",
    )
    operator_s3_secret: str = Field(
        default="oda-analyst-s3",
        description="Secret (keys accessKey, secretKey) the builder pods read the lake with.",
    )
    operator_runtime_class: str = Field(
        default="gvisor",
        description="RuntimeClass the users' sandbox pods ask for (every pod the analyst makes "
        "to run analysis code): the chart names it per release, so that two releases in one "
        "cluster do not share one.",
    )
    codeagent_sandbox: Literal["local", "pod"] = Field(
        default="local",
        description="Where `oda-analyst serve`'s code agent runs scripts: local (gVisor or "
        "bwrap on this host, the laptop default) or pod (a gVisor pod of the user, without "
        "network, made through the Kubernetes API with this process's credentials: the "
        "chart's analyst). With --pipeline-port it is always pod.",
    )
    sandbox_namespace: str | None = Field(
        default=None,
        description="Namespace of the web UI users' sandbox pods (code run through the code "
        "agent's MCP server for no AnalystQuery); unset: in a cluster only queries run code "
        "(each in its own namespace).",
    )
    operator_peering: str = Field(
        default="oda-analyst",
        description="Name of the kopf peering object (ClusterKopfPeering, or KopfPeering in "
        "each served namespace) the operator's replicas share: the chart names it per release.",
    )
    operator_metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of the operator's Prometheus /metrics (reconciles, queue depth, "
        "queries by phase, durations, pod launches, webhook decisions); unset = not served.",
    )
    operator_metrics_host: str = Field(
        default="0.0.0.0",  # Prometheus scrapes it through the operator's metrics Service
        description="Address the operator's /metrics listens on.",
    )
    operator_instance: str | None = Field(
        default=None,
        description="The Helm release the operator belongs to (label app.kubernetes.io/"
        "instance); set = its builder and sandbox pods carry that label, which the release's "
        "NetworkPolicies select them by.",
    )
    operator_poll_s: float = Field(
        default=2.0,
        gt=0,
        le=300,
        description="How often the operator looks again at a pod or graph build it waits for.",
    )
    operator_vkg_capacity: int = Field(
        default=64,
        ge=1,
        description="VKGCache resources kept per namespace; beyond it the least recently used "
        "are deleted (their TTL deletes them too).",
    )
    operator_vkg_max_bytes: int = Field(
        default=0,
        ge=0,
        description="Total size of the Ready VKGCaches' graphs kept per namespace (bytes, as "
        "status.bytes counts them); beyond it the least recently used are deleted; 0 = no "
        "bound. A cache a running query reads is never deleted.",
    )
    operator_gc_interval_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="How often the operator looks at each VKGCache for its TTL and the bounds.",
    )
    operator_pipeline_url: str | None = Field(
        default=None,
        description="URL of the analyst's pipeline service (``oda-analyst serve "
        "--pipeline-port``; the chart's analyst Service): the operator asks it to understand "
        "and answer each query and runs no pipeline code itself. Required by the operator.",
    )
    operator_pipeline_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="Longest the operator waits for one answer of the analyst (a retrieval "
        "with charts runs for minutes).",
    )
    operator_max_queries: int = Field(
        default=32,
        ge=1,
        le=10_000,
        description="Queries the analyst works on at once for the whole cluster; more wait, "
        "and say so in status.admission.",
    )
    operator_max_queries_per_namespace: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="Queries of one namespace the analyst works on at once.",
    )
    operator_max_queries_per_user: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="Queries of one user (spec.user) the analyst works on at once.",
    )
    pipeline_max_concurrent: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Pipeline calls one analyst replica runs at once (``oda-analyst serve "
        "--pipeline-port``); more wait in line. Scale the analyst Deployment for more.",
    )
    operator_alerts_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of the operator's Alertmanager webhook receiver (POST /alerts); unset "
        "= no receiver. A firing alert becomes an AnalystQuery from its template.",
    )
    operator_alerts_host: str = Field(
        default="0.0.0.0",  # reached through its Service, from Alertmanager
        description="Address the alert receiver listens on.",
    )
    operator_alert_templates: Path | None = Field(
        default=None,
        description="YAML file of the alert templates (alert name → question; the chart's "
        "ConfigMap); required with operator_alerts_port.",
    )
    operator_alerts_token: str | None = Field(
        default=None,
        description="Bearer token Alertmanager must send to the alert receiver (its "
        "http_config.authorization credentials; the chart generates one). Unset: the receiver "
        "listens on loopback only.",
    )
    operator_alerts_namespace: str = Field(
        default="default",
        description="Namespace the alert-triggered AnalystQueries are created in.",
    )
    operator_alerts_user: str = Field(
        default="alertmanager",
        description="The user alert-triggered AnalystQueries run as (owns their sandbox).",
    )
    operator_alerts_per_minute: int = Field(
        default=6,
        ge=1,
        le=600,
        description="Most AnalystQueries alerts may start per minute; alerts beyond it are "
        "dropped (and logged), so an alert storm cannot flood the cluster.",
    )
    operator_alerts_webhook: str | None = Field(
        default=None,
        description="URL the answer of each alert-triggered query is POSTed to (JSON) when it "
        "finishes; unset = the answer is only linked on the AnalystQuery's annotations.",
    )
    operator_vllm_namespace: str | None = Field(
        default=None,
        description="Namespace of the chart's vLLM Deployments (labelled "
        "oda-analyst.dev/model=<model>); set = the operator scales them to zero when idle and "
        "back to one when a model-backed query arrives.",
    )
    operator_vllm_idle_s: float = Field(
        default=900.0,
        gt=0,
        description="Seconds without a model-backed query after which a vLLM Deployment is "
        "scaled to zero.",
    )
    webhook_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of the operator's admission webhook (HTTPS): it stamps an "
        "AnalystQuery's spec.user from its creator and checks spec.model.baseUrl; unset = no "
        "webhook is served.",
    )
    webhook_host: str = Field(
        default="0.0.0.0",  # the API server reaches it through its Service
        description="Address the admission webhook listens on.",
    )
    webhook_cert_dir: Path | None = Field(
        default=None,
        description="Folder with the webhook's serving certificate, tls.crt and tls.key (the "
        "chart's Secret, signed by the CA in its webhook configurations' caBundle); required "
        "with webhook_port.",
    )
    webhook_trusted_creators: str = Field(
        default="",
        description="User names (comma-separated) that may create AnalystQueries for another "
        "user: the operator's own ServiceAccount (scheduled runs, alert queries). Everyone "
        "else's queries run as themselves.",
    )
    webhook_model_urls: str = Field(
        default="",
        description="Model endpoints (comma-separated base URLs) an AnalystQuery's "
        "spec.model.baseUrl may name; any other is refused. Empty = no override is allowed.",
    )

    ui_users_file: Path | None = Field(
        default=None,
        description="The web UI's users: a file of 'user:<argon2 hash>' lines "
        "(`oda-analyst ui-hash-password` makes a hash).",
    )
    ui_users: str | None = Field(
        default=None,
        description="More web UI users, 'user:<argon2 hash>' entries separated by spaces.",
    )
    ui_secret: str | None = Field(
        default=None,
        description="Key that signs the web UI's session cookies. Unset: a random key per "
        "process (everyone signs in again after a restart; set it for several replicas).",
    )
    ui_db: Path | None = Field(
        default=None,
        description="The web UI's conversation history (SQLite). Empty means "
        "<data_dir>/webui/history.sqlite.",
    )
    ui_history: Literal["sqlite", "redis", "postgres"] = Field(
        default="sqlite",
        description="Where the web UI keeps conversation history: 'sqlite' (ODA_UI_DB), "
        "'redis' (the Redis of ODA_REDIS_URL, under the ODA_UI_REDIS_PREFIX keys) or "
        "'postgres' (ODA_UI_POSTGRES_URL).",
    )
    ui_postgres_url: str | None = Field(
        default=None,
        description="Postgres for the web UI's history (postgresql://user:pass@host:5432/db); "
        "its tables are oda_ui_*.",
    )
    ui_redis_prefix: str = Field(
        default="oda:ui", description="Prefix of the web UI's history keys in Redis."
    )
    ui_reference_time: str = Field(
        default="now",
        description="The web UI's reference-time default for every user: 'now', 'lake-end' "
        "(midnight after the lake's last day, so 'yesterday' is its newest day) or an ISO 8601 "
        "time (UTC).",
    )
    ui_auth: Literal["password", "oidc", "both"] = Field(
        default="password",
        description="How users sign in to the web UI: 'password' (ODA_UI_USERS_FILE / "
        "ODA_UI_USERS), 'oidc' (the identity provider of ODA_UI_OIDC_ISSUER) or 'both'.",
    )
    ui_oidc_issuer: str | None = Field(
        default=None,
        description="The OpenID Connect provider's issuer URL; its discovery document is "
        "<issuer>/.well-known/openid-configuration.",
    )
    ui_oidc_client_id: str | None = Field(
        default=None, description="The web UI's client id at the identity provider."
    )
    ui_oidc_client_secret: str | None = Field(
        default=None, description="The web UI's client secret at the identity provider."
    )
    ui_oidc_user_claim: str = Field(
        default="preferred_username",
        description="The verified ID-token claim that gives the user id (e.g. "
        "preferred_username, sub, email).",
    )
    ui_oidc_scope: str = Field(
        default="openid profile email", description="Scopes asked of the identity provider."
    )
    ui_oidc_label: str | None = Field(
        default=None,
        description="The provider's name on the sign-in button (default: the issuer URL).",
    )
    ui_public_url: str | None = Field(
        default=None,
        description="The web UI's URL as browsers see it (e.g. https://analyst.example.org), "
        "for the OIDC callback behind a proxy. Unset: the URL of each request.",
    )

    @field_validator("lake")
    @classmethod
    def _lake_uri(cls, value: str) -> str:
        if "://" in value and not value.startswith("s3://"):
            raise ValueError("only local folders and s3:// URIs are supported")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_auth(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Every Redis client builds its connection from redis_url alone, so the password is
        # folded in here once rather than taught to each client.
        password = info.data.get("redis_password")
        if not value or not password:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError("ODA_REDIS_PASSWORD needs a redis:// or rediss:// URL")
        if parts.password is not None:
            return value
        user, _, host = parts.netloc.rpartition("@")
        netloc = f"{user}:{quote(password, safe='')}@{host}"
        return urlunsplit(parts._replace(netloc=netloc))

    @field_validator("langfuse_host")
    @classmethod
    def _langfuse_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL, e.g. https://cloud.langfuse.com")
        return value.rstrip("/") if value else value

    @property
    def traces_location(self) -> Path:
        """The trace folder: the configured one, or <data_dir>/traces."""
        return self.trace_dir or self.data_dir / "traces"

    @property
    def lake_location(self) -> str:
        """The lake as a string: the configured one, or the default folder under data_dir."""
        return self.lake or str(self.data_dir / "lake")

    def storage_options(self) -> dict[str, str]:
        """Object-store options for Polars ``scan_parquet`` on an s3:// lake."""
        opts: dict[str, str] = {"aws_region": self.s3_region, "timeout": f"{self.s3_timeout_s:g}s"}
        if self.s3_endpoint:
            opts["aws_endpoint_url"] = self.s3_endpoint
            if self.s3_endpoint.startswith("http://"):
                opts["aws_allow_http"] = "true"
        if self.s3_access_key:
            opts["aws_access_key_id"] = self.s3_access_key
        if self.s3_secret_key:
            opts["aws_secret_access_key"] = self.s3_secret_key
        return opts


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment plus explicit overrides; raise ConfigError if bad."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"ODA_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(
            f"invalid configuration: {problems}",
            hint="fix the environment variable(s) named above; `oda-analyst --help` lists them",
        ) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once)."""
    return load_settings()


def describe_settings() -> str:
    """One line per field, for ``--help``."""
    lines = []
    for name, field in Settings.model_fields.items():
        lines.append(f"ODA_{name.upper()}: {field.description}")
    return "\n".join(lines)
