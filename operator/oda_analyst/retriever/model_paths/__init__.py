"""Model-backed paths of the retriever stages (used when ODA_LLM_BASE_URL/ODA_LLM_MODEL are set).

Each path makes a stage more flexible and none is trusted alone: every model answer is schema-
constrained and then checked by the same symbolic component the rule-based path uses.

- ``time_model``: the time window by the model, reconciled with the deterministic parser.
- ``grounding_model``: ``LLMGroundingHooks``, the model's intent / decomposition / plugin
  classification for ``grounding.ground_metrics`` (which runs the reflection loop).
- ``sparql_model``: SPARQL written by the model from ontology paths and top-k curated examples
  (``fewshot``), validated, regenerated with the diagnostics within a budget.
- ``completeness`` and ``repair``: the semantic completeness check and the bounded repair that
  may change only SELECT and GROUP BY (enforced on the parse trees, not trusted to the prompt).

Which stages ask the model, and which ask it even where the rules would not need it, is set by
ODA_LLM_STAGES and ODA_LLM_FORCE (``stages``; ``review`` applies them to the completeness check
and repair).

Token use is recorded per stage in a ``TokenLedger``: time, intent, decompose, plugin, sparql,
completeness, repair; every call carries its stage's ``max_tokens`` (``budgets``). Control-flow
tests use a scripted OpenAI-compatible server (in tests/); the integration tier runs the same
paths against a real one (llama.cpp serving SmolLM2-135M) and checks that whatever the model
says, no answer is completed wrong.
"""

STAGES: tuple[str, ...] = (
    "time", "intent", "decompose", "plugin", "sparql", "completeness", "repair"
)  # fmt: skip
