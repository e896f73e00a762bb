"""Feedback on an answer sent to LangFuse as a score on the request's trace.

The local history store is written first and is the record; LangFuse gets a copy when it is
configured. The SDK queues the score and a background thread of its own posts it (with retries),
so a slow or unreachable LangFuse neither delays the page nor loses the feedback, which is
already stored. The score's id is the answer's message id: changing one's mind on an answer
replaces its score rather than adding a second.

The SDK is given a tracer provider of its own: by default it would install itself as the
process's global provider and export every span of the process, which
``oda_analyst.observability.tracing`` already sends to LangFuse over OTLP.
"""

from __future__ import annotations

import logging
import re

from langfuse import Langfuse
from opentelemetry.sdk.trace import TracerProvider

from oda_analyst.errors import ConfigError
from oda_analyst.webui.store import Feedback

__all__ = ["SCORE_NAME", "Feedback", "LangfuseFeedback", "from_settings"]
log = logging.getLogger(__name__)
SCORE_NAME = "user-feedback"
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


class LangfuseFeedback:
    """Sends each feedback as a NUMERIC score (+1 up, -1 down) with its comment."""

    def __init__(
        self,
        host: str,
        public_key: str,
        secret_key: str,
        *,
        score_name: str = SCORE_NAME,
        timeout_s: int = 5,
    ) -> None:
        self.score_name = score_name
        self._client = Langfuse(
            public_key=public_key,
            secret_key=secret_key,
            base_url=host,
            timeout=timeout_s,
            tracer_provider=TracerProvider(),
            flush_interval=1.0,
        )

    def send(self, feedback: Feedback) -> bool:
        """Queue the score; False (nothing sent) when the answer has no trace to score."""
        if feedback.trace_id is None or not _TRACE_ID.match(feedback.trace_id):
            log.info("feedback on %s kept locally only: no trace id", feedback.message_id)
            return False
        try:
            self._client.create_score(
                name=self.score_name,
                value=float(feedback.score),
                trace_id=feedback.trace_id,
                score_id=feedback.message_id,
                data_type="NUMERIC",
                comment=feedback.comment or None,
                metadata={"request_id": feedback.request_id, "user": feedback.user},
            )
        except Exception:  # the local store has it; LangFuse is a copy
            log.exception("feedback on %s not queued for LangFuse", feedback.message_id)
            return False
        return True

    def flush(self) -> None:
        self._client.flush()

    def close(self) -> None:
        self._client.shutdown()


def from_settings(
    host: str | None, public_key: str | None, secret_key: str | None
) -> LangfuseFeedback | None:
    """The sender the LangFuse settings ask for, or None when LangFuse is not configured."""
    if not host:
        return None
    if not (public_key and secret_key):
        raise ConfigError(
            "ODA_LANGFUSE_HOST is set but not both of its keys",
            hint="set ODA_LANGFUSE_PUBLIC_KEY (pk-lf-…) and ODA_LANGFUSE_SECRET_KEY (sk-lf-…)",
        )
    return LangfuseFeedback(host, public_key, secret_key)
