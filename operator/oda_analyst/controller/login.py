"""kopf's own login, from the same source and library as controller/kube.py: in the pod its
service account, elsewhere $KUBECONFIG as it is now. Left to itself, kopf logs in through
kubernetes_asyncio's defaults (the library being installed), which read $KUBECONFIG once, when
the library is imported. Registered on import by each module kopf runs (handlers, webhooks)."""

from __future__ import annotations

from typing import Any

import kopf

from oda_analyst.controller.kube import credentials_source, load_configuration


@kopf.on.login()
async def login(**_: Any) -> kopf.ConnectionInfo:
    c = await load_configuration(credentials_source())
    scheme, _sp, token = (await c.get_api_key_with_prefix("BearerToken") or "").rpartition(" ")
    return kopf.ConnectionInfo(server=str(c.host), ca_path=c.ssl_ca_cert, insecure=not c.verify_ssl,
                               scheme=scheme or None, token=token or None,
                               certificate_path=c.cert_file, private_key_path=c.key_file,
                               username=c.username or None, password=c.password or None,
                               proxy_url=c.proxy)  # fmt: skip
