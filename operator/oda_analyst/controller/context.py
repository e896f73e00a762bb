"""What every reconcile needs, built once at operator start-up."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from oda_analyst.config import Settings
from oda_analyst.controller.bucket import Bucket
from oda_analyst.controller.kube import Kube
from oda_analyst.controller.manifests import WorkloadEnv
from oda_analyst.controller.port import Pipeline


@dataclass
class Context:
    settings: Settings
    kube: Kube
    pipeline: Pipeline
    bucket: Bucket
    env: WorkloadEnv
    s3_cidr: str | None
    # One pipeline call at a time per operator: stage 1 and retrieval are CPU-bound and the
    # embedded parts of the retriever are not built for many threads at once.
    pipeline_lock: asyncio.Lock


def workload_env(settings: Settings) -> WorkloadEnv:
    return WorkloadEnv(
        image=settings.operator_image,
        sandbox_image=settings.operator_sandbox_image,
        lake=settings.lake_location,
        s3_endpoint=settings.s3_endpoint,
        s3_region=settings.s3_region,
        s3_secret=settings.operator_s3_secret,
        sparql_endpoint=settings.sparql_endpoint,
        sparql_update_url=settings.sparql_update_url,
        sparql_gsp_url=settings.sparql_gsp_url,
        scan_engine=settings.scan_engine,
        dask_scheduler=settings.dask_scheduler,
        instance=settings.operator_instance,
    )


def endpoint_cidr(url: str | None) -> str | None:
    """The /32 (or /128) of the S3 endpoint's address, for the analysis pod's fence."""
    if not url:
        return None
    host = urlsplit(url).hostname
    if not host:
        return None
    try:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return None
    return f"{address}/{address.max_prefixlen}"
