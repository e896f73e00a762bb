"""The LLM client used by every model-backed stage (an OpenAI-compatible endpoint such as vLLM).

``LLMClient.from_settings(settings)`` returns None when no model is configured: callers then take
the rule-based path. The scripted test server lives in ``oda_analyst.llm.scripted`` and is not
imported here.
"""

from oda_analyst.llm.client import LLMClient
from oda_analyst.llm.errors import LLMError, LLMOutputError, LLMToolCallError, LLMUnavailableError
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
    "ChatResult",
    "LLMClient",
    "LLMError",
    "LLMOutputError",
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
