"""Synthetic M100 ExaData lake: deterministic, window-independent, physically coherent.

``build_spec`` resolves a profile and command-line options; ``generate`` streams the partitions.
"""

from oda_analyst.lake.synth.generate import GenerationReport, ProgressEvent, generate
from oda_analyst.lake.synth.spec import PROFILES, GenerationSpec, PluginRequest, build_spec

__all__ = [
    "PROFILES",
    "GenerationReport",
    "GenerationSpec",
    "PluginRequest",
    "ProgressEvent",
    "build_spec",
    "generate",
]
