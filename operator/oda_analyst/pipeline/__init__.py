"""The analyst's side of the operator's pipeline port: the work and its HTTP service.

``local`` does the work (stage 1, retrieval, the coordinator, the baselines, the graphs' cache
entries), ``coordinated`` and ``sandbox_pod`` run the coordinator with its scripts in the user's
sandbox pods, ``http`` and ``server`` serve it to the operator (``oda-analyst serve
--pipeline-port``), and ``build_vkg`` is the builder Job's program. The operator imports none of
this (import-linter): it reaches the pipeline only through ``controller.port_http``.
"""
