"""Observability: traces (a JSON file per request, LangFuse over OTLP), Prometheus metrics, and
the provenance record of each answer.

A leaf package: it imports nothing of ours but ``config`` and ``errors``, so every layer may
use it (import-linter keeps it so).
"""
