"""The Kubernetes operator: AnalystQuery and VKGCache reconciled by kopf.

``handlers`` holds the thin kopf registrations (run with ``kopf run -m
oda_analyst.controller.handlers``); ``manifests`` and ``status`` are pure builders tested without
a cluster; ``kube`` and ``bucket`` do the I/O; ``port`` is the pipeline the operator drives,
which the analyst Deployment serves (``port_http`` is the operator's client of it: no pipeline
code runs here); ``admission`` bounds how many queries the analyst works on at once. The
users' sandbox pods are the analyst's (``oda_analyst.pipeline.sandbox_pod``), not the
operator's.
"""
