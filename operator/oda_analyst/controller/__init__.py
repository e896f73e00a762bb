"""The Kubernetes operator: AnalystQuery and VKGCache reconciled by kopf.

``handlers`` holds the thin kopf registrations (run with ``kopf run -m
oda_analyst.controller.handlers``); ``manifests`` and ``status`` are pure builders tested without
a cluster; ``kube`` and ``bucket`` do the I/O; ``port`` is the pipeline the operator drives
(the retriever service today, the coordinator once it is plugged in); ``workloads`` are the
programs the operator's pods run.
"""
