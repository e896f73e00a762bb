"""The LLM client over real HTTP against the scripted OpenAI-compatible server on loopback.

Protocol-level only: the server replays scripted replies, so these tests check the wire format,
timeouts, retries and accounting — never the quality of any answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from oda_analyst.llm import (
    LLMClient,
    LLMError,
    LLMOutputError,
    LLMToolCallError,
    LLMUnavailableError,
    RetryPolicy,
    TokenLedger,
    function_tool,
    tool_result_message,
)
from scripted_server import ScriptedOpenAIServer, ScriptStep

pytestmark = pytest.mark.integration

USER = [
    {"role": "system", "content": "You plan queries over HPC telemetry."},
    {"role": "user", "content": "Mean GPU temperature of rack 12 yesterday?"},
]


class PlanSketch(BaseModel):
    """A small stand-in for the query plan."""

    metric: str = Field(pattern=r"^[a-z0-9_]+$")
    plugin: str
    racks: list[int] = Field(min_length=1)


class RecordingSleep(list[float]):
    """Really sleeps, and keeps every requested wait so tests can assert on it."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(model="scripted-qwen") as srv:
        yield srv


def client_for(server: ScriptedOpenAIServer, **options: Any) -> LLMClient:
    options.setdefault("retry", RetryPolicy(max_retries=2, backoff_base_s=0.01))
    return LLMClient(server.base_url, server.model, **options)


def test_structured_output_round_trip(server: ScriptedOpenAIServer) -> None:
    answer = {"metric": "gpu0_core_temp", "plugin": "ipmi_pub", "racks": [12]}
    server.add(ScriptStep.json_reply(answer, usage=(321, 17)))
    ledger = TokenLedger()
    with client_for(server, ledger=ledger) as client:
        plan, result = client.structured(USER, None, stage="plan", model_cls=PlanSketch)
    assert plan == PlanSketch(**answer)
    assert result.model == "scripted-qwen"
    [body] = server.chat_bodies
    assert body["model"] == "scripted-qwen"
    assert body["messages"] == USER
    assert body["temperature"] == 0.0
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": PlanSketch.model_json_schema(), "strict": True},
    }
    assert ledger.snapshot()["plan"]["prompt_tokens"] == 321
    assert ledger.snapshot()["plan"]["completion_tokens"] == 17


@pytest.mark.parametrize(
    ("mode", "field", "expected"),
    [
        ("structured_outputs", "structured_outputs", lambda s: {"json": s}),
        ("guided_json", "guided_json", lambda s: s),
    ],
)
def test_vllm_structured_modes_on_the_wire(
    server: ScriptedOpenAIServer, mode: str, field: str, expected: Any
) -> None:
    server.add(ScriptStep.json_reply({"metric": "x", "plugin": "p", "racks": [1]}))
    schema = PlanSketch.model_json_schema()
    with client_for(server, structured_mode=mode) as client:
        data, _ = client.structured(USER, schema, stage="plan")
    assert data == {"metric": "x", "plugin": "p", "racks": [1]}
    [body] = server.chat_bodies
    assert body[field] == expected(schema)
    assert "response_format" not in body


def test_schema_violation_then_repair(server: ScriptedOpenAIServer) -> None:
    server.add(
        ScriptStep.json_reply({"metric": "GPU temp", "plugin": "ipmi_pub", "racks": []}),
        ScriptStep.json_reply({"metric": "gpu0_core_temp", "plugin": "ipmi_pub", "racks": [12]}),
    )
    with client_for(server) as client:
        plan, _ = client.structured(USER, None, stage="plan", model_cls=PlanSketch, repairs=1)
    assert plan.racks == [12]
    first, second = server.chat_bodies
    feedback = second["messages"][-1]["content"]
    assert "$.metric" in feedback and "$.racks" in feedback
    assert first["messages"] == USER
    assert second["messages"][: len(USER)] == USER
    assert second["messages"][-2]["role"] == "assistant"
    assert json.loads(second["messages"][-2]["content"])["racks"] == []


def test_schema_violation_without_repair_is_an_output_error(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.reply("The mean temperature was 41 °C."))
    with client_for(server) as client, pytest.raises(LLMOutputError) as info:
        client.structured(USER, None, stage="plan", model_cls=PlanSketch)
    assert "not valid JSON" in info.value.errors[0]
    assert len(server.chat_bodies) == 1


def test_tool_call_round_trip(server: ScriptedOpenAIServer) -> None:
    tool = function_tool(
        "rack_nodes",
        "The compute nodes of one rack.",
        {
            "type": "object",
            "properties": {"rack": {"type": "integer"}},
            "required": ["rack"],
            "additionalProperties": False,
        },
    )
    server.add(
        ScriptStep.tool_call("rack_nodes", {"rack": 12}),
        lambda request: ScriptStep.reply(
            f"rack 12 has {json.loads(request['messages'][-1]['content'])['count']} nodes"
        ),
    )
    executed: list[int] = []

    def rack_nodes(rack: int) -> dict[str, Any]:
        executed.append(rack)
        return {"rack": rack, "count": 20}

    ledger = TokenLedger()
    with client_for(server, ledger=ledger) as client:
        first = client.chat(USER, stage="retriever", tools=[tool], tool_choice="auto")
        assert first.finish_reason == "tool_calls"
        [tool_call] = first.tool_calls
        conversation = [
            *USER,
            first.assistant_message(),
            tool_result_message(tool_call, rack_nodes(**tool_call.arguments)),
        ]
        final = client.chat(conversation, stage="retriever", tools=[tool])
    assert executed == [12]
    assert final.content == "rack 12 has 20 nodes"
    request_1, request_2 = server.chat_bodies
    assert request_1["tools"] == [tool] and request_1["tool_choice"] == "auto"
    sent_call = request_2["messages"][-2]["tool_calls"][0]
    assert sent_call["id"] == tool_call.id
    assert json.loads(sent_call["function"]["arguments"]) == {"rack": 12}
    assert request_2["messages"][-1]["tool_call_id"] == tool_call.id
    # Two calls in one stage; usage is the server's word counts, summed by the ledger.
    stats = ledger.snapshot()["retriever"]
    assert stats["calls"] == 2
    assert stats["total_tokens"] == first.usage.total_tokens + final.usage.total_tokens > 0


def test_invalid_tool_arguments_over_http(server: ScriptedOpenAIServer) -> None:
    tool = function_tool("rack_nodes", "", {"type": "object", "properties": {}})
    server.add(ScriptStep.tool_call("rack_nodes", '{"rack": 12'))
    with client_for(server) as client, pytest.raises(LLMToolCallError) as info:
        client.chat(USER, stage="retriever", tools=[tool])
    assert info.value.content == '{"rack": 12'
    assert "not valid JSON" in info.value.errors[0]


def test_timeout_on_a_delayed_reply(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.reply("late", delay_s=30), ScriptStep.reply("late", delay_s=30))
    ledger = TokenLedger()
    client = client_for(
        server,
        read_timeout_s=0.3,
        ledger=ledger,
        retry=RetryPolicy(max_retries=1, backoff_base_s=0),
    )
    with client, pytest.raises(LLMUnavailableError) as info:
        client.chat(USER, stage="plan")
    assert "did not answer within the read timeout" in info.value.message
    assert len(server.chat_bodies) == 1  # not retried: the server is still on it
    assert ledger.snapshot()["plan"]["failed_calls"] == 1
    assert ledger.snapshot()["plan"]["retries"] == 0


def test_per_call_timeout_over_http(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.reply("late", delay_s=30), ScriptStep.reply("prompt"))
    with client_for(server, retry=RetryPolicy(max_retries=0)) as client:
        with pytest.raises(LLMUnavailableError):
            client.chat(USER, stage="plan", timeout_s=0.2)
        assert client.chat(USER, stage="plan").content == "prompt"


def test_429_retry_after_is_honoured_and_bounded(server: ScriptedOpenAIServer) -> None:
    server.add(
        ScriptStep.error(429, "queue full", retry_after="0.2"),
        ScriptStep.error(429, "queue full", retry_after="3600"),
        ScriptStep.reply("done"),
    )
    sleeps = RecordingSleep()
    policy = RetryPolicy(max_retries=2, max_retry_after_s=0.3)
    with client_for(server, retry=policy, sleep=sleeps) as client:
        result = client.chat(USER, stage="plan")
    assert result.content == "done"
    assert result.attempts == 3
    assert sleeps == [0.2, 0.3]
    assert len(server.chat_bodies) == 3


def test_5xx_and_dropped_connection_are_retried(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.error(503, "loading"), ScriptStep.disconnect(), ScriptStep.reply("up"))
    ledger = TokenLedger()
    with client_for(server, ledger=ledger) as client:
        assert client.chat(USER, stage="plan").content == "up"
    assert ledger.snapshot()["plan"]["retries"] == 2


def test_400_is_not_retried(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.error(400, "response_format is not supported"), ScriptStep.reply("x"))
    with client_for(server) as client, pytest.raises(LLMError) as info:
        client.chat(USER, stage="plan")
    assert not isinstance(info.value, LLMUnavailableError)
    assert "response_format is not supported" in info.value.message
    assert server.remaining == 1


def test_malformed_body_is_a_protocol_error(server: ScriptedOpenAIServer) -> None:
    server.add(ScriptStep.malformed())
    with client_for(server) as client, pytest.raises(LLMError, match="not JSON"):
        client.chat(USER, stage="plan")


def test_exhausted_script_fails_loudly(server: ScriptedOpenAIServer) -> None:
    with client_for(server) as client, pytest.raises(LLMError, match="script is exhausted"):
        client.chat(USER, stage="plan")


def test_api_key_and_health_check() -> None:
    with ScriptedOpenAIServer(model="m1", api_key="sekret") as srv:
        with LLMClient(srv.base_url, "m1", api_key="sekret") as good:
            assert good.models() == ["m1"]
            good.check_model()
        with LLMClient(srv.base_url, "m1", api_key="wrong") as bad, pytest.raises(LLMError) as info:
            bad.models()
        assert "ODA_LLM_API_KEY" in (info.value.hint or "")
        assert [r.headers.get("authorization") for r in srv.requests] == [
            "Bearer sekret",
            "Bearer sekret",
            "Bearer wrong",
        ]


def test_endpoint_down_is_unavailable(unused_port: int) -> None:
    client = LLMClient(
        f"http://127.0.0.1:{unused_port}/v1",
        "m",
        retry=RetryPolicy(max_retries=1, backoff_base_s=0),
    )
    with client, pytest.raises(LLMUnavailableError) as info:
        client.chat(USER, stage="plan")
    assert "cannot reach" in info.value.message
    assert "ODA_LLM_BASE_URL" in (info.value.hint or "")


def test_concurrent_calls_share_one_ledger() -> None:
    def echo(request: dict[str, Any]) -> ScriptStep:
        return ScriptStep.reply(request["messages"][-1]["content"].upper())

    ledger = TokenLedger()
    results: list[str] = []
    lock = threading.Lock()
    with (
        ScriptedOpenAIServer(default=echo) as srv,
        LLMClient(srv.base_url, srv.model, ledger=ledger) as client,
    ):

        def worker(i: int) -> None:
            for j in range(5):
                msg = [{"role": "user", "content": f"ping {i} {j}"}]
                content = client.chat(msg, stage=f"stage{i % 2}").content
                with lock:
                    results.append(content or "")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results) == sorted(f"PING {i} {j}" for i in range(4) for j in range(5))
    total = ledger.total()
    assert total["calls"] == 20
    # Word counts: 3 words in each prompt, 3 in each echoed reply.
    assert (total["prompt_tokens"], total["completion_tokens"]) == (60, 60)
    assert set(ledger.snapshot()) == {"stage0", "stage1"}
