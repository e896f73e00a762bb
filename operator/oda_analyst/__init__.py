"""ODA Analyst: a neurosymbolic deep analyst for operational telemetry."""

__version__ = "0.1.0"
