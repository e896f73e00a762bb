"""The operator's admission webhook, thin: kopf serves it (HTTPS) and controller.identity decides.

``/stamp-user`` (mutating, on create) writes the requester's own user name into ``spec.user``;
``/check-query`` (validating, on create and update) refuses a changed ``spec.user`` and a model
endpoint outside the allowlist. The webhook configurations that send requests here are the
chart's (templates/webhook.yaml: the paths, the Service, the CA bundle); the operator never writes
them, so it needs no cluster-wide right on admission configurations.
"""

from __future__ import annotations

from typing import Any

import kopf

from oda_analyst.config import get_settings
from oda_analyst.controller import metrics, names
from oda_analyst.controller.identity import (
    AdmissionRefusedError,
    Policy,
    check_model,
    check_update,
    user_on_create,
)
from oda_analyst.controller.login import login  # noqa: F401  (kopf's login, registered here)
from oda_analyst.errors import ConfigError

Q = (names.GROUP, names.VERSION, names.QUERY_PLURAL)


@kopf.on.startup()
def webhook_server(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    app = get_settings()
    memo["identity"] = Policy.from_settings(app)
    metrics.serve(app.operator_metrics_port, app.operator_metrics_host)  # once per process
    if app.webhook_port is None:
        return
    if app.webhook_cert_dir is None:
        raise ConfigError("ODA_WEBHOOK_PORT is set but no serving certificate is",
                          hint="set ODA_WEBHOOK_CERT_DIR to the folder of tls.crt and tls.key "
                               "(the chart mounts its webhook Secret)")  # fmt: skip
    certs = app.webhook_cert_dir
    settings.admission.server = kopf.WebhookServer(
        addr=app.webhook_host, port=app.webhook_port,
        certfile=str(certs / "tls.crt"), pkeyfile=str(certs / "tls.key"))  # fmt: skip


def _policy(memo: Any) -> Policy:
    policy = memo.get("identity")
    return policy if isinstance(policy, Policy) else Policy.from_settings(get_settings())


def _refuse(err: AdmissionRefusedError) -> kopf.AdmissionError:
    text = f"{err.message} ({err.hint})" if err.hint else err.message
    return kopf.AdmissionError(text, code=403)


@kopf.on.mutate(*Q, id="stamp-user")
def stamp_user(*, spec: kopf.Spec, userinfo: kopf.UserInfo, patch: kopf.Patch, memo: Any,
               **kwargs: Any) -> None:  # fmt: skip
    if kwargs.get("operation") != "CREATE":
        return
    try:
        user = user_on_create(spec, str(userinfo.get("username", "")), _policy(memo))
    except AdmissionRefusedError as err:
        metrics.webhook_decision("stamp-user", "refused")
        raise _refuse(err) from None
    if spec.get("user") != user:
        patch.setdefault("spec", {})["user"] = user
    metrics.webhook_decision("stamp-user", "stamped" if spec.get("user") != user else "kept")


@kopf.on.validate(*Q, id="check-query")
def check_query(*, spec: kopf.Spec, subresource: str | None, memo: Any, **kwargs: Any) -> None:
    if subresource:  # status and the like: written by the operator, no identity in them
        return
    operation, old, new = kwargs.get("operation"), kwargs.get("old"), kwargs.get("new")
    try:
        if operation == "CREATE":
            check_model(spec, _policy(memo))
        elif operation == "UPDATE" and old and new:
            check_update(old, new, _policy(memo))
    except AdmissionRefusedError as err:
        metrics.webhook_decision("check-query", "refused")
        raise _refuse(err) from None
    metrics.webhook_decision("check-query", "allowed")


@kopf.on.cleanup()
def webhook_cleanup(**_: Any) -> None:
    metrics.stop()
