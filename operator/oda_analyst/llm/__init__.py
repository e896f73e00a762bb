"""The LLM client used by every model-backed stage (an OpenAI-compatible endpoint such as vLLM),
a thin layer of our bounds, dialects, guards, ledger and spans over the ``openai`` SDK.

``LLMClient.from_settings(settings)`` returns None when no model is configured: callers then take
the rule-based path. The scripted server the control-flow tests use lives in ``tests/`` (it is a
test helper, not part of the product).
"""

from oda_analyst.llm.client import LLMClient
from oda_analyst.llm.errors import (
    LLMContextError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMToolCallError,
    LLMUnavailableError,
)
from oda_analyst.llm.memory import MEMORY
from oda_analyst.llm.retry import RetryPolicy
from oda_analyst.llm.tokens import TokenLedger
from oda_analyst.llm.types import (
    ChatResult,
    Message,
    StructuredMode,
    ToolCall,
    ToolSpec,
    Usage,
    function_tool,
    tool_from_model,
    tool_result_message,
)

__all__ = [
    "MEMORY",
    "ChatResult",
    "LLMClient",
    "LLMContextError",
    "LLMError",
    "LLMOutputError",
    "LLMRequestError",
    "LLMToolCallError",
    "LLMUnavailableError",
    "Message",
    "RetryPolicy",
    "StructuredMode",
    "TokenLedger",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "function_tool",
    "tool_from_model",
    "tool_result_message",
]
