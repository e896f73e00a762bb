"""What every reconcile needs, built once at operator start-up."""

from __future__ import annotations

from dataclasses import dataclass

from oda_analyst.config import Settings
from oda_analyst.controller.admission import Admission, Bounds
from oda_analyst.controller.bucket import Bucket
from oda_analyst.controller.kube import Kube
from oda_analyst.controller.manifests import WorkloadEnv
from oda_analyst.controller.port import Pipeline
from oda_analyst.errors import ConfigError


@dataclass
class Context:
    settings: Settings
    kube: Kube
    pipeline: Pipeline
    bucket: Bucket
    env: WorkloadEnv
    # Which queries the analyst works on now (the rest wait, bounded by the settings).
    admission: Admission


def admission(settings: Settings) -> Admission:
    return Admission(Bounds(cluster=settings.operator_max_queries,
                            namespace=settings.operator_max_queries_per_namespace,
                            user=settings.operator_max_queries_per_user))  # fmt: skip


def pipeline_url(settings: Settings) -> str:
    """Where the analyst serves the pipeline; the operator cannot answer a query without it."""
    url = settings.operator_pipeline_url
    if not url:
        raise ConfigError(
            "ODA_OPERATOR_PIPELINE_URL is not set: the operator runs no pipeline itself",
            hint="point it at the analyst's pipeline service (oda-analyst serve "
            "--pipeline-port 8092; the chart sets it to the analyst Service)",
        )
    return url


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
        runtime_class=settings.operator_runtime_class,
    )
