"""Alerts → AnalystQueries, the pure part: the templates, the question an alert asks, the
query's manifest, dedup keys and the rate limit. The HTTP receiver (alert_receiver.py) and the
link back (alert_link.py) do the I/O.

A template is chosen by the alert's ``alertname``; it lists questions in order of preference and
the first whose placeholders the alert's labels can all fill is asked (``{node}``, ``{job}``,
``{rack}`` from the labels named in the file's ``labels`` map, ``{start}``/``{end}`` from the
alert's time window). Label values are checked before they go into a question: an alert is
data from elsewhere and must not write free text into what the analyst reads.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oda_analyst.controller import names
from oda_analyst.errors import ConfigError

PLACEHOLDERS = frozenset({"node", "job", "rack", "start", "end"})
LABEL_ALERT = f"{names.GROUP}/alert-fingerprint"
ANN_ALERT_NAME = f"{names.GROUP}/alert-name"
ANN_ALERT_STARTS = f"{names.GROUP}/alert-starts-at"
ANN_ALERT_LABELS = f"{names.GROUP}/alert-labels"
ANN_ALERT_SOURCE = f"{names.GROUP}/alert-generator-url"
ANN_ANSWER = f"{names.GROUP}/alert-answer"
ANN_ANSWER_URI = f"{names.GROUP}/alert-answer-uri"
ANN_LINKED = f"{names.GROUP}/alert-linked"
# Node names, job ids and rack names: short, no spaces, nothing a sentence could hide in.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
# Without a `labels` map: Prometheus' own `job` label names the scrape job, never a batch job.
DEFAULT_LABELS = {"node": ("node",), "job": ("slurm_job_id", "job_id"), "rack": ("rack",)}
_NO_END = datetime(1, 1, 2, tzinfo=UTC)  # Alertmanager's "0001-01-01T00:00:00Z" = still firing


class AlertTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    questions: list[str] = Field(min_length=1)
    lookback_minutes: int = Field(default=60, ge=1, le=7 * 24 * 60, alias="lookbackMinutes")
    analysis: Literal["auto", "none"] = "none"

    @field_validator("questions")
    @classmethod
    def _known_placeholders(cls, questions: list[str]) -> list[str]:
        for q in questions:
            used = {f for _, f, _, _ in string.Formatter().parse(q) if f is not None}
            unknown = used - PLACEHOLDERS
            if unknown:
                raise ValueError(f"unknown placeholder(s) {sorted(unknown)} in {q!r} "
                                 f"(known: {sorted(PLACEHOLDERS)})")  # fmt: skip
            if not {"start", "end"} <= used:
                raise ValueError(f"{q!r} must name the alert's window: {{start}} and {{end}}")
        return questions


class AlertTemplates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, list[str]] = Field(default_factory=dict)
    templates: dict[str, AlertTemplate]

    @field_validator("labels")
    @classmethod
    def _known_labels(cls, labels: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = set(labels) - {"node", "job", "rack"}
        if unknown:
            raise ValueError(f"labels may map only node, job and rack, not {sorted(unknown)}")
        return labels

    def sources(self, placeholder: str) -> list[str]:
        return self.labels.get(placeholder) or list(DEFAULT_LABELS[placeholder])


def load_templates(path: Path) -> AlertTemplates:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the alert templates {path}: {exc}",
                          hint="set ODA_OPERATOR_ALERT_TEMPLATES to the chart's "
                               "alert-templates.yaml") from None  # fmt: skip
    return parse_templates(raw, str(path))


def parse_templates(raw: Any, where: str = "the alert templates") -> AlertTemplates:
    try:
        return AlertTemplates.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        hint = "see charts/oda-analyst/files/alert-templates.yaml"
        raise ConfigError(f"{where}: {at}: {first['msg']}", hint=hint) from None


class Alert(BaseModel):
    """One alert of an Alertmanager webhook (payload version 4)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    status: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime = Field(alias="startsAt")
    ends_at: datetime | None = Field(default=None, alias="endsAt")
    generator_url: str = Field(default="", alias="generatorURL")
    fingerprint: str = Field(min_length=1, max_length=64)

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


class Webhook(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: str = "4"
    status: str = "firing"
    alerts: list[Alert]


@dataclass(frozen=True)
class Planned:
    """What one alert becomes: a query to create, or the reason it is not."""

    fingerprint: str
    alertname: str
    query: dict[str, Any] | None = None
    skipped: str | None = None


def window(alert: Alert, template: AlertTemplate, now: datetime) -> tuple[datetime, datetime]:
    """From ``lookback`` before the alert started to when it ended (or now, while firing)."""
    start = alert.starts_at.astimezone(UTC) - timedelta(minutes=template.lookback_minutes)
    end = now
    if alert.ends_at is not None and _NO_END < alert.ends_at.astimezone(UTC) < now:
        end = alert.ends_at.astimezone(UTC)
    return start, max(end, alert.starts_at.astimezone(UTC))


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("[%Y-%m-%d %H:%M:%S]")


def fill(templates: AlertTemplates, template: AlertTemplate, alert: Alert,
         start: datetime, end: datetime) -> str | None:  # fmt: skip
    """The first question whose placeholders this alert fills, or None."""
    values: dict[str, str] = {"start": _stamp(start), "end": _stamp(end)}
    for placeholder in ("node", "job", "rack"):
        for label in templates.sources(placeholder):
            value = alert.labels.get(label)
            if value is not None and _SAFE_VALUE.match(value):
                values[placeholder] = value
                break
    for question in template.questions:
        used = {f for _, f, _, _ in string.Formatter().parse(question) if f}
        if used <= values.keys():
            return question.format_map(values)
    return None


def query_name(alert: Alert) -> str:
    """One name per firing episode of one alert: a resend maps to the same query."""
    episode = hashlib.sha256(alert.starts_at.isoformat().encode()).hexdigest()[:8]
    return names.dns_name("alert", alert.name or "unnamed", alert.fingerprint[:16], episode)


def get_alert_query(alert: Alert, question: str, *, namespace: str, user: str,
                    template: AlertTemplate, end: datetime) -> dict[str, Any]:  # fmt: skip
    labels = {k: v for k, v in alert.labels.items() if len(k) < 64 and len(v) < 256}
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.QUERY_KIND,
        "metadata": {
            "name": query_name(alert),
            "namespace": namespace,
            "labels": {
                LABEL_ALERT: names.dns_name(alert.fingerprint),
                names.LABEL_COMPONENT: "alert",
            },
            "annotations": {
                ANN_ALERT_NAME: alert.name,
                ANN_ALERT_STARTS: alert.starts_at.astimezone(UTC).isoformat(),
                ANN_ALERT_LABELS: json.dumps(labels, sort_keys=True),
                ANN_ALERT_SOURCE: alert.generator_url,
            },
        },
        "spec": {
            "question": question,
            "user": user,
            "referenceTime": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "analysis": template.analysis,
        },
    }


def plan(webhook: Webhook, templates: AlertTemplates, *, namespace: str, user: str,
         now: datetime) -> list[Planned]:  # fmt: skip
    """Each alert of a webhook: its query, or why it has none (resolved, no template …)."""
    out: list[Planned] = []
    for alert in webhook.alerts:
        fp, an = alert.fingerprint, alert.name
        if alert.status != "firing":
            out.append(Planned(fp, an, skipped="resolved"))
            continue
        template = templates.templates.get(an)
        if template is None:
            out.append(Planned(fp, an, skipped=f"no template for alert {an!r}"))
            continue
        start, end = window(alert, template, now)
        question = fill(templates, template, alert, start, end)
        if question is None:
            out.append(Planned(fp, an, skipped="its labels fill none of the template's questions"))
            continue
        out.append(Planned(fp, an, query=get_alert_query(alert, question, namespace=namespace,
                                                         user=user, template=template,
                                                         end=end)))  # fmt: skip
    return out


@dataclass
class RateLimit:
    """At most ``per_minute`` admissions in any sliding minute (``clock`` in seconds)."""

    per_minute: int
    clock: Callable[[], float]
    _times: deque[float] = field(default_factory=deque)

    def admit(self) -> bool:
        now = self.clock()
        while self._times and now - self._times[0] >= 60.0:
            self._times.popleft()
        if len(self._times) >= self.per_minute:
            return False
        self._times.append(now)
        return True


@dataclass
class Seen:
    """Query names already created (bounded): a resend does not cost the API server a call
    or the rate limit a slot. The name itself dedups across restarts (create is idempotent)."""

    capacity: int = 4096
    _names: dict[str, None] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def add(self, name: str) -> None:
        self._names[name] = None
        while len(self._names) > self.capacity:
            del self._names[next(iter(self._names))]


def link_payload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What is POSTed to the answer webhook when an alert's query finishes."""
    meta, status = obj["metadata"], obj.get("status") or {}
    ann = meta.get("annotations") or {}
    return {
        "alertname": ann.get(ANN_ALERT_NAME),
        "fingerprint": (meta.get("labels") or {}).get(LABEL_ALERT),
        "startsAt": ann.get(ANN_ALERT_STARTS),
        "generatorURL": ann.get(ANN_ALERT_SOURCE),
        "query": {"namespace": meta["namespace"], "name": meta["name"]},
        "question": obj["spec"]["question"],
        "phase": status.get("phase"),
        "understoodAs": status.get("understoodAs"),
        "answer": status.get("answer") or status.get("message"),
        "answerUri": status.get("answerUri"),
        "artifacts": list(status.get("artifacts") or []),
    }


def link_annotations(obj: Mapping[str, Any], linked_at: datetime) -> dict[str, str]:
    status = obj.get("status") or {}
    text = str(status.get("answer") or status.get("message") or status.get("phase") or "")
    return {
        ANN_ANSWER: text[:1000],
        ANN_ANSWER_URI: str(status.get("answerUri") or ""),
        ANN_LINKED: linked_at.astimezone(UTC).isoformat(),
    }


def summarise(planned: Sequence[Planned]) -> dict[str, list[str]]:
    return {"skipped": [f"{p.alertname}/{p.fingerprint}: {p.skipped}" for p in planned
                        if p.skipped]}  # fmt: skip
