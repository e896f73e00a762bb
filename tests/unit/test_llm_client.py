"""The LLM client at the protocol level, against ``httpx.MockTransport`` (no sockets, no model).

These tests check what goes on the wire and how answers, errors and retries are handled; they
say nothing about answer quality.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field, model_validator

from oda_analyst.config import Settings
from oda_analyst.errors import ConfigError, OdaError
from oda_analyst.llm import (
    LLMClient,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMToolCallError,
    LLMUnavailableError,
    RetryPolicy,
    TokenLedger,
    ToolCall,
    function_tool,
    tool_from_model,
    tool_result_message,
)
from oda_analyst.llm.retry import parse_retry_after

BASE = "http://llm.test/v1"
USER = [{"role": "user", "content": "how hot were the GPUs?"}]

Handler = Callable[[httpx.Request], httpx.Response]


def completion(
    content: str | None = "ok",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] = (11, 4),
    finish_reason: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class Recorder:
    """A MockTransport handler replaying responses in order and keeping every request."""

    def __init__(self, *replies: httpx.Response | Exception | dict[str, Any]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, dict):
            return httpx.Response(200, json=reply)
        return reply

    def body(self, i: int = -1) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.requests[i].content)
        return data


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_client(handler: Handler, *, sleeps: Sleeps | None = None, **options: Any) -> LLMClient:
    options.setdefault("retry", RetryPolicy(max_retries=2, rand=lambda: 0.5))
    return LLMClient(
        BASE,
        "m",
        transport=httpx.MockTransport(handler),
        sleep=sleeps if sleeps is not None else Sleeps(),
        **options,
    )


class Answer(BaseModel):
    metric: str
    nodes: list[int] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_negative(self) -> Answer:
        if any(n < 0 for n in self.nodes):
            raise ValueError("node ids are non-negative")
        return self


# -- request bodies --------------------------------------------------------------------------


def test_plain_chat_sends_model_messages_and_bearer_key() -> None:
    rec = Recorder(completion())
    client = make_client(rec, api_key="sekret")
    client.chat(USER, stage="summary", temperature=0.3, max_tokens=64)
    req = rec.requests[0]
    assert req.method == "POST"
    assert str(req.url) == f"{BASE}/chat/completions"
    assert req.headers["authorization"] == "Bearer sekret"
    assert rec.body() == {"model": "m", "messages": USER, "temperature": 0.3, "max_tokens": 64}


def test_no_authorization_header_without_key() -> None:
    rec = Recorder(completion())
    make_client(rec).chat(USER, stage="s")
    assert "authorization" not in rec.requests[0].headers


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "response_format",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": "SCHEMA", "strict": True},
                }
            },
        ),
        ("structured_outputs", {"structured_outputs": {"json": "SCHEMA"}}),
        ("guided_json", {"guided_json": "SCHEMA"}),
    ],
)
def test_structured_request_fields_per_mode(mode: str, expected: dict[str, Any]) -> None:
    schema = Answer.model_json_schema()
    rec = Recorder(completion('{"metric": "gpu0_temp", "nodes": [1]}'))
    client = make_client(rec, structured_mode=mode)
    client.structured(USER, schema, stage="plan", schema_name="answer")
    body = rec.body()
    wanted = json.loads(json.dumps(expected).replace('"SCHEMA"', json.dumps(schema)))
    for key, value in wanted.items():
        assert body[key] == value
    others = {"response_format", "structured_outputs", "guided_json"} - set(wanted)
    assert not others & set(body)


def test_tools_and_tool_choice_by_name() -> None:
    tool = function_tool("lookup", "find a node", {"type": "object", "properties": {}})
    rec = Recorder(completion(), completion())
    client = make_client(rec)
    client.chat(USER, stage="s", tools=[tool], tool_choice="lookup")
    assert rec.body()["tools"] == [tool]
    assert rec.body()["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    client.chat(USER, stage="s", tools=[tool], tool_choice="auto")
    assert rec.body()["tool_choice"] == "auto"


def test_tool_choice_without_tools_is_a_caller_bug() -> None:
    rec = Recorder()
    with pytest.raises(ValueError, match="tool_choice needs tools"):
        make_client(rec).chat(USER, stage="s", tool_choice="lookup")
    assert rec.requests == []


def test_per_call_timeout_overrides_read_timeout() -> None:
    rec = Recorder(completion(), completion())
    client = make_client(rec, read_timeout_s=30.0, connect_timeout_s=2.0)
    client.chat(USER, stage="s")
    client.chat(USER, stage="s", timeout_s=1.5)
    first, second = (r.extensions["timeout"] for r in rec.requests)
    assert first["read"] == 30.0 and first["connect"] == 2.0
    assert second["read"] == 1.5 and second["connect"] == 1.5


# -- parsing ---------------------------------------------------------------------------------


def test_tool_calls_and_usage_are_parsed() -> None:
    tool = function_tool(
        "lookup",
        "find a node",
        {"type": "object", "properties": {"node": {"type": "string"}}, "required": ["node"]},
    )
    rec = Recorder(
        completion(
            None,
            tool_calls=[call("lookup", '{"node": "r256n01"}', "c7")],
            usage=(120, 9),
            finish_reason="tool_calls",
        )
    )
    result = make_client(rec).chat(USER, stage="retriever", tools=[tool])
    assert result.content is None
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls == (ToolCall("c7", "lookup", {"node": "r256n01"}),)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (120, 9)
    assert result.usage.total_tokens == 129
    assistant = result.assistant_message()
    assert assistant["tool_calls"][0]["id"] == "c7"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"node": "r256n01"}
    reply = tool_result_message(result.tool_calls[0], {"rows": 3})
    assert reply == {"role": "tool", "tool_call_id": "c7", "content": '{"rows": 3}'}


@pytest.mark.parametrize(
    ("arguments", "name", "fragment"),
    [
        ('{"node": ', "lookup", "not valid JSON"),
        ("[1, 2]", "lookup", "expected a JSON object"),
        ('{"node": 5}', "lookup", "5 is not of type 'string'"),
        ('{"node": "a"}', "drop_table", "no tool named 'drop_table'"),
    ],
)
def test_invalid_tool_call_is_a_typed_error(arguments: str, name: str, fragment: str) -> None:
    tool = function_tool(
        "lookup",
        "find a node",
        {"type": "object", "properties": {"node": {"type": "string"}}, "required": ["node"]},
    )
    ledger = TokenLedger()
    rec = Recorder(completion(None, tool_calls=[call(name, arguments)], usage=(50, 7)))
    with pytest.raises(LLMToolCallError) as info:
        make_client(rec, ledger=ledger).chat(USER, stage="retriever", tools=[tool])
    err = info.value
    assert isinstance(err, OdaError)
    assert any(fragment in e for e in err.errors)
    assert err.content == arguments
    assert (
        err.result is not None and err.result.message["tool_calls"][0]["function"]["name"] == name
    )
    assert fragment in err.feedback()
    # The server billed the call, so its tokens are counted.
    assert ledger.snapshot()["retriever"]["prompt_tokens"] == 50


def test_tool_from_model_uses_the_model_schema() -> None:
    spec = tool_from_model(Answer, "answer")
    assert spec["function"]["parameters"] == Answer.model_json_schema()
    assert spec["function"]["name"] == "answer"


@pytest.mark.parametrize(
    "body",
    [[1, 2], {"choices": []}, {"choices": [{"finish_reason": "stop"}]}, {"nope": 1}],
)
def test_non_completion_body_is_a_protocol_error(body: Any) -> None:
    rec = Recorder(httpx.Response(200, json=body))
    with pytest.raises(LLMError) as info:
        make_client(rec).chat(USER, stage="s")
    assert not isinstance(info.value, LLMUnavailableError | LLMOutputError)
    assert "ODA_LLM_BASE_URL" in (info.value.hint or "")


def test_malformed_json_body_is_a_protocol_error_without_retry() -> None:
    rec = Recorder(httpx.Response(200, content=b'{"choices": ['))
    with pytest.raises(LLMError, match="not JSON"):
        make_client(rec).chat(USER, stage="s")
    assert len(rec.requests) == 1


# -- structured outputs ----------------------------------------------------------------------


def test_structured_returns_a_dict_or_a_model() -> None:
    text = '{"metric": "gpu0_temp", "nodes": [3, 4]}'
    rec = Recorder(completion(text), completion(text))
    client = make_client(rec)
    data, result = client.structured(USER, Answer.model_json_schema(), stage="plan")
    assert data == {"metric": "gpu0_temp", "nodes": [3, 4]}
    assert result.content == text
    model, _ = client.structured(USER, None, stage="plan", model_cls=Answer)
    assert model == Answer(metric="gpu0_temp", nodes=[3, 4])
    assert rec.body()["response_format"]["json_schema"]["schema"] == Answer.model_json_schema()


def test_code_fenced_json_is_accepted() -> None:
    rec = Recorder(completion('```json\n{"metric": "x", "nodes": [1]}\n```'))
    data, _ = make_client(rec).structured(USER, Answer.model_json_schema(), stage="plan")
    assert data == {"metric": "x", "nodes": [1]}


@pytest.mark.parametrize(
    ("content", "model_cls", "fragment"),
    [
        ('{"metric": "x", "nodes": []}', None, "$.nodes"),
        ('{"nodes": [1]}', None, "'metric' is a required property"),
        ('{"metric": "x", "nodes": ["a"]}', None, "$.nodes[0]"),
        ("the hottest GPU is...", None, "not valid JSON"),
        ("", None, "empty"),
        ('{"metric": "x", "nodes": [-1]}', Answer, "node ids are non-negative"),
    ],
)
def test_schema_violation_is_an_output_error(
    content: str, model_cls: type[BaseModel] | None, fragment: str
) -> None:
    rec = Recorder(completion(content))
    with pytest.raises(LLMOutputError) as info:
        make_client(rec).structured(
            USER, Answer.model_json_schema(), stage="plan", model_cls=model_cls
        )
    err = info.value
    assert not isinstance(err, LLMToolCallError)
    assert any(fragment in e for e in err.errors), err.errors
    assert err.content == content
    assert err.result is not None and err.result.content == content


def test_truncated_answer_hints_at_max_tokens() -> None:
    rec = Recorder(completion('{"metric": "x", "no', finish_reason="length"))
    with pytest.raises(LLMOutputError) as info:
        make_client(rec).structured(USER, Answer.model_json_schema(), stage="plan", max_tokens=8)
    assert "cut off" in info.value.message
    assert "max_tokens" in (info.value.hint or "")
    assert rec.body()["max_tokens"] == 8


def test_repairs_show_the_model_its_errors() -> None:
    bad = '{"metric": "x", "nodes": []}'
    rec = Recorder(completion(bad), completion('{"metric": "x", "nodes": [2]}'))
    ledger = TokenLedger()
    model, result = make_client(rec, ledger=ledger).structured(
        USER, None, stage="plan", model_cls=Answer, repairs=1
    )
    assert model.nodes == [2]
    assert result.content == '{"metric": "x", "nodes": [2]}'
    second = rec.body(1)["messages"]
    assert second[: len(USER)] == USER
    assert second[len(USER)] == {"role": "assistant", "content": bad}
    assert second[-1]["role"] == "user" and "$.nodes" in second[-1]["content"]
    assert ledger.snapshot()["plan"]["calls"] == 2


def test_repairs_are_bounded() -> None:
    bad = completion('{"metric": 1}')
    rec = Recorder(bad, bad)
    with pytest.raises(LLMOutputError):
        make_client(rec).structured(USER, Answer.model_json_schema(), stage="plan", repairs=1)
    assert len(rec.requests) == 2


def test_invalid_schema_fails_before_any_request() -> None:
    rec = Recorder()
    with pytest.raises(LLMError, match="JSON Schema sent to the model is invalid"):
        make_client(rec).structured(USER, {"type": "no-such-type"}, stage="plan")
    assert rec.requests == []


# -- retries and timeouts --------------------------------------------------------------------


def test_retry_on_503_then_success_counts_retries() -> None:
    sleeps = Sleeps()
    ledger = TokenLedger()
    rec = Recorder(httpx.Response(503, json={"message": "loading"}), completion(usage=(10, 2)))
    result = make_client(rec, sleeps=sleeps, ledger=ledger).chat(USER, stage="plan")
    assert result.attempts == 2
    assert len(rec.requests) == 2
    assert sleeps == [0.375]  # base 0.5 s, half of it jittered, rand 0.5: 0.25 + 0.125
    stats = ledger.snapshot()["plan"]
    assert (stats["calls"], stats["retries"], stats["failed_calls"]) == (1, 1, 0)
    assert stats["prompt_tokens"] == 10


def test_retries_are_bounded_and_back_off_exponentially() -> None:
    sleeps = Sleeps()
    ledger = TokenLedger()
    rec = Recorder(*[httpx.Response(502, text="bad gateway") for _ in range(4)])
    client = make_client(
        rec, sleeps=sleeps, ledger=ledger, retry=RetryPolicy(max_retries=3, rand=lambda: 1.0)
    )
    with pytest.raises(LLMUnavailableError) as info:
        client.chat(USER, stage="plan")
    assert len(rec.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]
    assert "gave up after 4 attempt(s)" in info.value.message
    assert "bad gateway" in info.value.message
    stats = ledger.snapshot()["plan"]
    assert (stats["calls"], stats["retries"], stats["failed_calls"]) == (1, 3, 1)


@pytest.mark.parametrize(
    ("status", "hint"),
    [(400, "ODA_LLM_STRUCTURED_MODE"), (401, "ODA_LLM_API_KEY"), (404, "ODA_LLM_MODEL"), (422, "")],
)
def test_no_retry_on_4xx_other_than_429(status: int, hint: str) -> None:
    rec = Recorder(httpx.Response(status, json={"error": {"message": "nope", "type": "x"}}))
    with pytest.raises(LLMError) as info:
        make_client(rec).chat(USER, stage="s")
    assert not isinstance(info.value, LLMUnavailableError)
    assert len(rec.requests) == 1
    assert f"HTTP {status}: nope" in info.value.message
    assert hint in (info.value.hint or "")


def test_connect_timeout_after_retries_is_unavailable() -> None:
    rec = Recorder(*[httpx.ConnectTimeout("slow") for _ in range(3)])
    ledger = TokenLedger()
    with pytest.raises(LLMUnavailableError) as info:
        make_client(rec, ledger=ledger).chat(USER, stage="plan")
    assert len(rec.requests) == 3
    assert "timed out" in info.value.message
    assert "ODA_LLM_BASE_URL" in (info.value.hint or "")
    assert ledger.snapshot()["plan"]["failed_calls"] == 1


def test_a_read_timeout_is_not_retried() -> None:
    # The server is still generating: a resend would queue a second copy behind the first.
    rec = Recorder(httpx.ReadTimeout("slow"), completion("late"))
    with pytest.raises(LLMUnavailableError) as info:
        make_client(rec).chat(USER, stage="plan")
    assert len(rec.requests) == 1 and "not retried" in info.value.message


def test_connection_error_is_retried() -> None:
    rec = Recorder(httpx.ConnectError("refused"), completion("fine"))
    assert make_client(rec).chat(USER, stage="s").content == "fine"
    assert len(rec.requests) == 2


def test_retry_after_is_honoured_and_capped() -> None:
    sleeps = Sleeps()
    rec = Recorder(
        httpx.Response(429, headers={"Retry-After": "3"}, json={"message": "busy"}),
        httpx.Response(429, headers={"Retry-After": "120"}, json={"message": "busy"}),
        completion(),
    )
    policy = RetryPolicy(max_retries=2, max_retry_after_s=10.0, rand=lambda: 0.0)
    make_client(rec, sleeps=sleeps, retry=policy).chat(USER, stage="s")
    assert sleeps == [3.0, 10.0]


def test_429_exhausted_is_unavailable() -> None:
    rec = Recorder(httpx.Response(429, json={"message": "busy"}))
    with pytest.raises(LLMUnavailableError, match="HTTP 429: busy"):
        make_client(rec, retry=RetryPolicy(max_retries=0)).chat(USER, stage="s")


def test_parse_retry_after_forms() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30)), now=now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30)), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_backoff_is_capped_and_jittered_within_bounds() -> None:
    low = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.5, rand=lambda: 0.0)
    high = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.5, rand=lambda: 1.0)
    assert [low.backoff_s(n) for n in range(4)] == [0.5, 1.0, 2.0, 2.5]
    assert [high.backoff_s(n) for n in range(4)] == [1.0, 2.0, 4.0, 5.0]
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


# -- token ledger ----------------------------------------------------------------------------


def test_ledger_totals_per_stage_and_per_call_ledger() -> None:
    rec = Recorder(completion(usage=(10, 1)), completion(usage=(20, 2)), completion(usage=(5, 5)))
    shared = TokenLedger()
    own = TokenLedger()
    client = make_client(rec, ledger=shared)
    client.chat(USER, stage="plan")
    client.chat(USER, stage="plan")
    client.chat(USER, stage="summary", ledger=own)
    snap = shared.snapshot()
    assert set(snap) == {"plan"}
    assert snap["plan"]["prompt_tokens"] == 30
    assert snap["plan"]["completion_tokens"] == 3
    assert snap["plan"]["total_tokens"] == 33
    assert snap["plan"]["calls"] == 2
    assert own.snapshot()["summary"]["total_tokens"] == 10
    shared.merge(own)
    shared.merge({"codeagent": {"prompt_tokens": 7, "calls": 1}})
    assert shared.total()["prompt_tokens"] == 42
    assert shared.total()["calls"] == 4
    with pytest.raises(ValueError, match="unknown token-ledger fields"):
        shared.merge({"x": {"tokens": 1}})


def test_ledger_is_thread_safe() -> None:
    ledger = TokenLedger()

    def work(stage: str) -> None:
        for _ in range(2000):
            ledger.record(stage, prompt_tokens=3, completion_tokens=1, retries=1)

    threads = [threading.Thread(target=work, args=(f"s{i % 2}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = ledger.snapshot()
    assert snap["s0"]["prompt_tokens"] == 3 * 2000 * 3
    assert snap["s1"]["calls"] == 3 * 2000
    assert ledger.total()["retries"] == 6 * 2000
    assert ledger.total()["total_tokens"] == 4 * 6 * 2000


# -- settings and health ---------------------------------------------------------------------


def test_from_settings_none_when_no_model_configured() -> None:
    assert LLMClient.from_settings(Settings(llm_base_url=None, llm_model=None)) is None


@pytest.mark.parametrize(
    ("base_url", "model", "fragment"),
    [
        ("http://vllm:8000/v1", None, "ODA_LLM_MODEL"),
        (None, "qwen", "ODA_LLM_BASE_URL"),
        ("vllm:8000/v1", "qwen", "http(s) URL"),
    ],
)
def test_from_settings_half_configured_is_a_config_error(
    base_url: str | None, model: str | None, fragment: str
) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        LLMClient.from_settings(Settings(llm_base_url=base_url, llm_model=model))


def test_from_settings_builds_a_client() -> None:
    settings = Settings(llm_base_url="http://vllm:8000/v1/", llm_model="qwen", llm_api_key="k")
    rec = Recorder(completion())
    client = LLMClient.from_settings(settings, transport=httpx.MockTransport(rec))
    assert client is not None
    client.chat(USER, stage="s")
    assert str(rec.requests[0].url) == "http://vllm:8000/v1/chat/completions"
    assert rec.requests[0].headers["authorization"] == "Bearer k"
    assert rec.body()["model"] == "qwen"


def test_models_and_check_model() -> None:
    listing = {"object": "list", "data": [{"id": "qwen"}, {"id": "llama"}]}
    rec = Recorder(listing, listing)
    client = make_client(rec)
    assert client.models() == ["qwen", "llama"]
    assert rec.requests[0].method == "GET" and str(rec.requests[0].url) == f"{BASE}/models"
    with pytest.raises(ConfigError, match="'m' is not served") as info:
        client.check_model()
    assert "qwen, llama" in (info.value.hint or "")


def test_a_500_validation_error_is_not_retried_and_is_named_plainly() -> None:
    # llama-cpp-python answers a request it cannot validate with HTTP 500 and pydantic's text.
    text = (
        "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input "
        "should be 'text' or 'json_object' [type=literal_error, input_value='json_schema']\n"
        "    For further information visit https://errors.pydantic.dev/2.11/v/literal_error"
    )
    rec = Recorder(httpx.Response(500, json={"error": {"message": text, "type": "internal"}}))
    ledger = TokenLedger()
    with pytest.raises(LLMRequestError) as info:
        make_client(rec, ledger=ledger).chat(USER, stage="time", response_schema={"type": "object"})
    assert len(rec.requests) == 1 and ledger.snapshot()["time"]["retries"] == 0
    message = info.value.message
    assert "\n" not in message and "errors.pydantic.dev" not in message
    assert "does not take the structured-output form" in message


def test_every_request_carries_max_tokens() -> None:
    rec = Recorder(*[httpx.Response(200, json=completion("ok")) for _ in range(3)])
    client = make_client(rec, default_max_tokens=77, max_tokens_cap=50)
    client.chat(USER, stage="a")
    client.chat(USER, stage="b", max_tokens=20)
    client.chat(USER, stage="c", max_tokens=400)
    assert [json.loads(r.content)["max_tokens"] for r in rec.requests] == [50, 20, 50]


# -- what the openai SDK underneath does differently -------------------------------------------


def sse(*events: dict[str, Any] | str) -> httpx.Response:
    """A streamed answer: each event as one server-sent ``data:`` line."""
    lines = (f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    return httpx.Response(
        200, content="".join(lines).encode(), headers={"content-type": "text/event-stream"}
    )


def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice], **more}


def test_a_streamed_answer_is_assembled_with_its_tool_calls_and_usage() -> None:
    tool = function_tool("lookup", "", {"type": "object", "properties": {}})
    start = {"index": 0, "id": "c9", "type": "function", "function": {"name": "lookup"}}
    rec = Recorder(
        sse(
            chunk({"role": "assistant", "content": "Rack "}),
            chunk({"content": "12", "tool_calls": [start | {"function": {"name": "lookup",
                                                                         "arguments": '{"n'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '": 1}'}}]}, "length"),
            {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [],
             "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}},
            "[DONE]",
        )
    )  # fmt: skip
    ledger = TokenLedger()
    result = make_client(rec, ledger=ledger).chat(USER, stage="s", tools=[tool], stream=True)
    assert rec.body()["stream"] is True and rec.body()["stream_options"] == {"include_usage": True}
    assert result.content == "Rack 12" and result.finish_reason == "length"
    assert result.tool_calls == (ToolCall("c9", "lookup", {"n": 1}),)
    assert (result.usage.prompt_tokens, result.usage.total_tokens) == (9, 12)
    assert ledger.snapshot()["s"]["completion_tokens"] == 3


def test_an_error_event_inside_a_stream_is_unavailable_and_not_retried() -> None:
    rec = Recorder(sse(chunk({"content": "par"}), {"error": {"message": "out of memory"}}))
    with pytest.raises(LLMUnavailableError, match="mid-stream: out of memory"):
        make_client(rec).chat(USER, stage="s", stream=True)
    assert len(rec.requests) == 1


def test_the_sdk_does_not_retry_on_its_own() -> None:
    # The SDK obeys a server's x-should-retry and resends read timeouts; our policy decides.
    rec = Recorder(
        httpx.Response(400, headers={"x-should-retry": "true"}, json={"message": "bad field"}),
        completion(),
    )
    with pytest.raises(LLMRequestError, match="HTTP 400: bad field"):
        make_client(rec).chat(USER, stage="s")
    assert len(rec.requests) == 1
    assert rec.requests[0].headers["x-stainless-retry-count"] == "0"
