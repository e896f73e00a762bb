"""What the operator runs beside kopf's handlers, started and stopped with it: the alert
receiver (when ``ODA_OPERATOR_ALERTS_PORT`` is set) and the vLLM idle loop (when
``ODA_OPERATOR_VLLM_NAMESPACE`` is set)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from oda_analyst.controller.alert_receiver import Receiver, Running, build_app, rate_limit, start
from oda_analyst.controller.alerts import load_templates
from oda_analyst.controller.context import Context
from oda_analyst.controller.model_scale import idle_loop
from oda_analyst.errors import ConfigError
from oda_analyst.service_auth import check_bind


@dataclass
class Sidecars:
    receiver: Running | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self) -> None:
        if self.receiver is not None:
            await self.receiver.stop()
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def start_sidecars(ctx: Context) -> Sidecars:
    s = ctx.settings
    out = Sidecars()
    if s.operator_alerts_port is not None:
        if s.operator_alert_templates is None:
            raise ConfigError("ODA_OPERATOR_ALERTS_PORT is set but no alert templates are",
                              hint="set ODA_OPERATOR_ALERT_TEMPLATES to the templates file "
                                   "(the chart mounts its ConfigMap)")  # fmt: skip
        receiver = Receiver(templates=load_templates(s.operator_alert_templates),
                            create=ctx.kube.create, namespace=s.operator_alerts_namespace,
                            user=s.operator_alerts_user,
                            limit=rate_limit(s.operator_alerts_per_minute))  # fmt: skip
        check_bind(s.operator_alerts_host, s.operator_alerts_token, what="the alert receiver",
                   variable="ODA_OPERATOR_ALERTS_TOKEN")  # fmt: skip
        out.receiver = start(build_app(receiver, token=s.operator_alerts_token),
                             s.operator_alerts_host, s.operator_alerts_port)  # fmt: skip
    if s.operator_vllm_namespace:
        out.tasks.append(asyncio.create_task(idle_loop(ctx.kube, s), name="vllm-idle"))
    return out
