"""``oda-analyst ui``: the web UI over the coordinator these settings wire, under uvicorn."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import uvicorn
from redis.asyncio import Redis
from starsessions import SessionStore
from starsessions.stores.redis import RedisStore

from oda_analyst.analyst import build_coordinator
from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError
from oda_analyst.lake import Lake
from oda_analyst.webui import langfuse_feedback
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import load_credentials
from oda_analyst.webui.coverage import Coverage, from_months
from oda_analyst.webui.history import History
from oda_analyst.webui.history_postgres import PostgresHistory
from oda_analyst.webui.history_redis import RedisHistory
from oda_analyst.webui.oidc import OidcLogin, config_from
from oda_analyst.webui.store import HistoryStore

log = logging.getLogger(__name__)


def open_history(settings: Settings) -> HistoryStore:
    """The history store the settings choose (ODA_UI_HISTORY: sqlite, redis or postgres)."""
    if settings.ui_history == "redis":
        if not settings.redis_url:
            raise ConfigError(
                "ODA_UI_HISTORY=redis but no Redis is configured",
                hint="set ODA_REDIS_URL (redis://host:6379/0), or ODA_UI_HISTORY=sqlite",
            )
        return RedisHistory(settings.redis_url, prefix=settings.ui_redis_prefix)
    if settings.ui_history == "postgres":
        if not settings.ui_postgres_url:
            raise ConfigError(
                "ODA_UI_HISTORY=postgres but no Postgres is configured",
                hint="set ODA_UI_POSTGRES_URL (postgresql://user:pass@host:5432/db), or "
                "ODA_UI_HISTORY=sqlite",
            )
        return PostgresHistory(settings.ui_postgres_url)
    return History(settings.ui_db or settings.data_dir / "webui" / "history.sqlite")


def open_sessions(settings: Settings) -> SessionStore | None:
    """Where sign-in sessions live: with the history in Redis, in the same Redis (expiring
    there, so replicas share them and sign-out revokes everywhere); else this process's memory
    (None: the app's default)."""
    if settings.ui_history == "redis" and settings.redis_url:
        return RedisStore(
            connection=Redis.from_url(settings.redis_url),
            prefix=f"{settings.ui_redis_prefix}:session:",
        )
    return None


def lake_coverage(settings: Settings) -> Coverage | None:
    """The lake's months, listed once at start (no data read); None when it cannot be listed
    (the page then shows no range, and each answer still says what the lake holds)."""
    try:
        return from_months(Lake.from_settings(settings).months())
    except Exception as err:  # the range is an aid: no lake fault may keep the UI from starting
        log.warning("the lake's range is not shown: %s", err)
        return None


def reference_time(spec: str | None, coverage: Coverage | None) -> datetime | None:
    """The reference-time control's default a site sets: ``now`` (or nothing), ``lake-end``
    (midnight after the lake's last day, so 'yesterday' is its newest day) or an ISO 8601 time
    (UTC without an offset). None is now."""
    text = (spec or "").strip()
    if text.lower() in ("", "now"):
        return None
    if text.lower() == "lake-end":
        if coverage is None:
            log.warning("reference time 'lake-end': the lake cannot be listed, so it is now")
        return coverage.end() if coverage else None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"reference time {text!r} is not 'now', 'lake-end' or an ISO 8601 time",
            hint="e.g. lake-end, or 2022-06-02T00:00Z",
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def oidc_login(settings: Settings) -> OidcLogin | None:
    if settings.ui_auth == "password":
        return None
    return OidcLogin(
        config_from(
            settings.ui_oidc_issuer,
            settings.ui_oidc_client_id,
            settings.ui_oidc_client_secret,
            settings.ui_oidc_user_claim,
            settings.ui_oidc_scope,
            settings.ui_oidc_label,
        )
    )


def serve_ui(settings: Settings, host: str, port: int, *, reference: str | None = None) -> None:
    """``reference``: the reference-time control's default for every user (``reference_time``)."""
    coverage = lake_coverage(settings)
    as_of = reference_time(reference, coverage)
    oidc = oidc_login(settings)
    users = (
        load_credentials(settings.ui_users_file, settings.ui_users)
        if settings.ui_auth != "oidc"
        else {}
    )
    feedback = langfuse_feedback.from_settings(
        settings.langfuse_host, settings.langfuse_public_key, settings.langfuse_secret_key
    )
    history = open_history(settings)
    app = create_app(
        build_coordinator(settings),
        users,
        history,
        secret=settings.ui_secret,
        # Requests run side by side, in-process servers too: each coordinator call acts for
        # its user through a context variable of its own (mcptools.acting_as).
        oidc=oidc,
        public_url=settings.ui_public_url,
        feedback_sink=feedback.send if feedback else None,
        session_store=open_sessions(settings),
        as_of=as_of,
        coverage=coverage,
    )
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        history.close()
        if feedback is not None:
            feedback.close()
