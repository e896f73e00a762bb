"""Which model-backed stages a configured model is used on, and where it is forced.

Two settings, read once (``ModelStages.from_settings``):

- ``ODA_LLM_STAGES`` (default ``all``): the stages that ask the model; the others run by the
  rules alone, as with no model.
- ``ODA_LLM_FORCE`` (default empty): the stages that ask the model even where the rules would
  not need it. This is how the model paths are exercised on questions the rules already read
  (the benchmark and the real-model tests run each stage forced in turn):

  - ``time``: the model reads the window although the parser did (the parser's reading is still
    the one used when it has one; a disagreement is noted);
  - ``intent``, ``decompose``, ``plugin``: asked as by default (every metric question asks them);
  - ``sparql``: the model writes the query of every plan instead of the compiler, and the answer
    is its query's, held to the validator, to the grounded request and to the compiled plan's
    figures (``crosscheck``), or a failure;
  - ``completeness``: asked as by default (every validated query);
  - ``repair``: a repair is asked for every validated query, even one the completeness check
    found complete.

Both take a comma-separated list of stage names, or the groups ``grounding`` (intent,
decompose, plugin), ``review`` (completeness, repair) and ``all``; ``none`` or empty is none.
A stage that is forced is used too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError
from oda_analyst.llm import LLMClient, TokenLedger
from oda_analyst.reading.types import Cardinality, Intent
from oda_analyst.retriever.grounding.ground import Reflection
from oda_analyst.retriever.grounding.plugin import PluginGuess
from oda_analyst.retriever.model_paths import STAGES
from oda_analyst.retriever.model_paths.grounding_model import T_REF, LLMGroundingHooks

GROUPS: dict[str, tuple[str, ...]] = {
    "all": STAGES,
    "grounding": ("intent", "decompose", "plugin"),
    "review": ("completeness", "repair"),
    "none": (),
}
GROUNDING = frozenset(GROUPS["grounding"])


def parse_stages(text: str, *, setting: str = "ODA_LLM_STAGES") -> frozenset[str]:
    """The stage names of a comma-separated list (groups expanded); ConfigError when one is not
    a stage or group, naming ``setting``."""
    out: set[str] = set()
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if name in GROUPS:
            out.update(GROUPS[name])
        elif name in STAGES:
            out.add(name)
        else:
            raise ConfigError(
                f"{setting} names {name!r}, which is not a model-backed stage",
                hint=f"use a comma-separated list of {', '.join(STAGES)}, or {', '.join(GROUPS)}",
            )
    return frozenset(out)


@dataclass(frozen=True)
class ModelStages:
    """The stages that ask the model (``used``) and those that ask it always (``forced``)."""

    used: frozenset[str] = frozenset(STAGES)
    forced: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, stages: str = "all", force: str = "") -> ModelStages:
        forced = parse_stages(force, setting="ODA_LLM_FORCE")
        return cls(parse_stages(stages) | forced, forced)

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelStages:
        return cls.parse(settings.llm_stages, settings.llm_force)

    def uses(self, stage: str) -> bool:
        return stage in self.used

    def forces(self, stage: str) -> bool:
        return stage in self.forced

    @property
    def grounding(self) -> bool:
        """Whether any of intent, decompose and plugin asks the model."""
        return bool(self.used & GROUNDING)

    def describe(self) -> str:
        """One line for notes and the benchmark: which stages use and force the model."""
        used = ",".join(s for s in STAGES if s in self.used) or "none"
        forced = ",".join(s for s in STAGES if s in self.forced) or "none"
        return f"model stages: {used}; forced: {forced}"


class SelectedHooks(LLMGroundingHooks):
    """``LLMGroundingHooks`` that ask the model only on the selected grounding stages; the
    others answer with the rules' prior, as confident as the rules needed to go on alone (so the
    grounding loop decides as it does with no model, neither reflecting nor failing on them)."""

    def __init__(
        self, client: LLMClient, stages: ModelStages, *, ledger: TokenLedger | None = None
    ) -> None:
        super().__init__(client, ledger=ledger)
        self.stages = stages

    def classify_intent(
        self, question: str, *, prior: Intent, reflection: Reflection | None
    ) -> tuple[Intent, float]:
        if not self.stages.uses("intent"):
            return prior, max(prior.confidence, T_REF)
        return super().classify_intent(question, prior=prior, reflection=reflection)

    def decompose(
        self, question: str, *, cardinality: Cardinality, prior: Sequence[str]
    ) -> tuple[list[str], float]:
        if not self.stages.uses("decompose"):
            return list(prior), 0.0  # confidence 0: the grounding loop keeps the rules' split
        return super().decompose(question, cardinality=cardinality, prior=prior)

    def classify_plugin(
        self, subquery: str, *, prior: PluginGuess, reflection: Reflection | None
    ) -> tuple[str, float]:
        if not self.stages.uses("plugin"):
            # Below the reflection threshold only when the rules were: then retrieval runs
            # unrestricted, exactly as with no model.
            return prior.plugin or "", prior.confidence
        return super().classify_plugin(subquery, prior=prior, reflection=reflection)
