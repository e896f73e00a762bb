"""The LLM client against a real OpenAI-compatible server: llama.cpp serving SmolLM2-135M.

Protocol realism, not answer quality: the structured-output form this server takes (and the one
it rejects, which is not retried), ``usage`` as the server reports it, ``max_tokens`` on every
stage, streaming, a context overflow, a timeout, a restart mid-request, a server found unusable
and remembered. Calls are few and short: the model serves one request at a time on two cores.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from llama_server import LOOPBACK, LlamaProcess, ModelEndpoint, base_url, start_llama
from oda_analyst.config import load_settings
from oda_analyst.llm import (
    MEMORY,
    LLMClient,
    LLMContextError,
    LLMOutputError,
    LLMRequestError,
    LLMToolCallError,
    LLMUnavailableError,
    RetryPolicy,
    TokenLedger,
    function_tool,
)
from oda_analyst.llm.doctor import diagnose
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.reading.rules.timeparse import parse_time
from oda_analyst.reading.types import Entities
from oda_analyst.retriever.model_paths import prompts
from oda_analyst.retriever.model_paths.budgets import STAGE_BUDGETS
from oda_analyst.retriever.model_paths.fewshot import load_examples, select_examples
from oda_analyst.retriever.model_paths.grounding_model import INTENT_SCHEMA
from oda_analyst.retriever.model_paths.ontology_paths import traversal_paths
from oda_analyst.retriever.model_paths.prompts import intent_messages, time_messages
from oda_analyst.retriever.model_paths.sparql_model import (
    GroundedRequest,
    describe_grounding,
    start_classes,
)
from oda_analyst.retriever.model_paths.time_model import TIME_SCHEMA, decide_time

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # two shared cores: slow

AS_OF = datetime(2022, 6, 15, 12, 0, tzinfo=UTC)
QUESTION = "Average power of node 900 on 1 June 2022 from 08:00 to 09:00"
SAY = [{"role": "user", "content": "Say hello."}]
TINY = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


class Sleeps(list[float]):
    """Records the backoff waits the client asks for (and does not wait)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(endpoint: ModelEndpoint, **options: Any) -> LLMClient:
    options.setdefault("retry", RetryPolicy(max_retries=3, backoff_base_s=0.01))
    options.setdefault("structured_mode", "auto")
    options.setdefault("read_timeout_s", 900.0)  # two shared cores can be very slow
    return LLMClient(endpoint.base_url, endpoint.model, **options)


def test_auto_finds_the_json_object_form_and_says_so(llama: ModelEndpoint) -> None:
    with client(llama) as c:
        assert c.structured_mode is None  # not asked yet
        assert c.detect_structured_mode() == "json_object"
        data, result = c.structured(SAY, TINY, stage="probe-test", max_tokens=16)
    assert isinstance(data["a"], int)
    assert result.usage.reported and result.usage.completion_tokens <= 16


def test_the_json_schema_form_is_rejected_once_and_not_retried(llama: ModelEndpoint) -> None:
    sleeps = Sleeps()
    ledger = TokenLedger()
    with client(llama, structured_mode="response_format", sleep=sleeps, ledger=ledger) as c:
        with pytest.raises(LLMRequestError) as caught:
            c.structured(SAY, TINY, stage="time", max_tokens=8)
        # llama.cpp answers HTTP 500 with a pydantic validation error: a malformed request.
        assert "HTTP 500" in caught.value.message and "Traceback" not in caught.value.message
        assert sleeps == [] and ledger.snapshot()["time"]["retries"] == 0
        # Found unusable once, remembered: the next call does not reach the server.
        with pytest.raises(LLMUnavailableError, match="remembered"):
            c.chat(SAY, stage="time")
        assert ledger.snapshot()["time"]["calls"] == 2


def test_usage_is_the_servers_and_the_stage_is_bounded(llama: ModelEndpoint) -> None:
    ledger = TokenLedger()
    bound = STAGE_BUDGETS["intent"]
    with client(llama, ledger=ledger) as c:
        try:
            data, result = c.structured(
                intent_messages(QUESTION), INTENT_SCHEMA, stage="intent",
                max_tokens=bound.max_tokens,
            )  # fmt: skip
            assert isinstance(data["metric"], bool)
        except LLMOutputError as exc:  # this model may ramble until the bound: still billed
            assert exc.result is not None and exc.result.finish_reason == "length"
            result = exc.result
    usage = result.usage
    assert usage.reported and usage.prompt_tokens > 100  # a real tokenizer's count
    assert usage.prompt_tokens <= bound.prompt_tokens
    assert usage.completion_tokens <= bound.max_tokens
    assert ledger.snapshot()["intent"]["prompt_tokens"] == usage.prompt_tokens


def test_a_runaway_model_is_cut_at_max_tokens(llama: ModelEndpoint) -> None:
    # Unconstrained, asked to go on forever: the bound holds, the answer says it was cut.
    prompt = [{"role": "user", "content": "Count from 1 to 1000, one number per line."}]
    with client(llama) as c:
        result = c.chat(prompt, stage="runaway", max_tokens=24)
        assert result.finish_reason == "length" and result.usage.completion_tokens == 24
        with pytest.raises(LLMOutputError, match="cut off at max_tokens"):
            c.structured(prompt, TINY | {"properties": {"a": {"type": "string"}}}, stage="cut",
                         max_tokens=3)  # fmt: skip


def test_streaming_gives_the_same_answer_without_inventing_usage(llama: ModelEndpoint) -> None:
    ledger = TokenLedger()
    with client(llama, ledger=ledger) as c:
        plain = c.chat(SAY, stage="plain", max_tokens=12)
        streamed = c.chat(SAY, stage="stream", max_tokens=12, stream=True)
    assert streamed.content == plain.content and streamed.content
    assert plain.usage.reported and plain.usage.completion_tokens > 0
    snap = ledger.snapshot()
    if streamed.usage.reported:  # vLLM sends usage in the last event; llama-cpp-python does not
        assert streamed.usage == plain.usage
    else:
        assert snap["stream"]["total_tokens"] == 0 and snap["stream"]["unreported_calls"] == 1


def test_context_overflow_names_the_stage_and_sizes(llama_small_context: ModelEndpoint) -> None:
    sleeps = Sleeps()
    with client(llama_small_context, sleep=sleeps) as c, pytest.raises(LLMContextError) as caught:
        c.structured(time_messages(QUESTION, AS_OF), TIME_SCHEMA, stage="time", max_tokens=64)
    err = caught.value
    assert err.stage == "time" and err.context_tokens == 512
    assert err.prompt_tokens is not None and err.prompt_tokens > 512
    assert "stage 'time'" in err.message and "512 tokens" in err.message
    assert sleeps == []
    # A prompt that does not fit says nothing about the server: it is not remembered unusable.
    assert MEMORY.down_reason((c.base_url, c.model), 0.0) is None


def test_the_time_stage_survives_a_context_overflow(llama_small_context: ModelEndpoint) -> None:
    with client(llama_small_context) as c:
        decision = decide_time(c, QUESTION, AS_OF)
    assert decision.source == "parser" and decision.parse.status == "ok"
    assert "does not fit the model's context window" in decision.notes[0]


def test_a_timeout_is_reported_and_remembered(llama: ModelEndpoint) -> None:
    prompt = [{"role": "user", "content": "Write a long story about a data centre."}]
    with client(llama, retry=RetryPolicy(max_retries=0), read_timeout_s=0.05) as c:
        with pytest.raises(LLMUnavailableError, match="read timeout"):
            # A small bound: the server goes on with a request its client left, and the next
            # test's call waits behind it (the server takes one request at a time).
            c.chat(prompt, stage="slow", max_tokens=8)
        assert c.unusable() is not None
    with client(llama) as again, pytest.raises(LLMUnavailableError, match="not usable"):
        again.chat(SAY, stage="slow")  # another client of the same server: known down


class KillingProxy:
    """A loopback TCP relay in front of the model server that kills the server right after it
    has relayed the first chat request: the client then waits on a request the server took and
    will never answer, whatever the speed of the machine (a timer raced fast runners)."""

    def __init__(self, upstream_port: int, kill: Callable[[], None]) -> None:
        self._upstream, self._kill, self._killed = upstream_port, kill, threading.Event()
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(downstream,), daemon=True).start()

    def _relay(self, downstream: socket.socket) -> None:
        try:
            upstream = socket.create_connection((LOOPBACK, self._upstream))
        except OSError:
            downstream.close()
            return
        threading.Thread(target=self._pump, args=(upstream, downstream, False), daemon=True).start()
        self._pump(downstream, upstream, True)

    def _pump(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
                if requests and b"/chat/completions" in chunk and not self._killed.is_set():
                    self._killed.set()
                    self._kill()
        except OSError:
            pass
        for end in (source, sink):  # shutdown, not only close: it wakes the other pump's recv
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


def test_a_server_restart_mid_request_is_retried() -> None:
    first, endpoint = start_llama(2048)
    servers: list[LlamaProcess] = [first]

    def restart(_seconds: float) -> None:  # the client's backoff wait: bring the server back
        if servers[-1].proc.poll() is not None:
            servers.append(start_llama(2048, port=endpoint.port)[0])

    proxy = KillingProxy(endpoint.port, first.proc.kill)
    prompt = [{"role": "user", "content": "Write a long story about a data centre."}]
    try:
        with client(endpoint.via(proxy.port), sleep=restart) as c:
            result = c.chat(prompt, stage="restart", max_tokens=120)
        assert proxy.killed
        assert result.attempts >= 2 and result.content
        assert len(servers) == 2
    finally:
        proxy.close()
        for server in servers:
            server.stop()


def test_a_bad_tool_call_is_refused_with_a_message_the_model_can_act_on(
    llama: ModelEndpoint,
) -> None:
    tool = function_tool(
        "query", "Ask the retriever a question about telemetry.",
        {"type": "object", "properties": {"question": {"type": "string"}, "limit": {
            "type": "integer", "minimum": 1}}, "required": ["question", "limit"],
         "additionalProperties": False},
    )  # fmt: skip
    prompt = [{"role": "user", "content": "Call the tool with limit minus five and no question."}]
    with client(llama) as c:
        try:
            result = c.chat(prompt, stage="tools", tools=[tool], tool_choice="query",
                            max_tokens=48)  # fmt: skip
        except LLMToolCallError as exc:  # what this model usually writes: broken arguments
            assert exc.errors and exc.errors[0].startswith(("arguments of query", "there is no"))
            assert "Answer again" in exc.feedback()
        else:  # or a call whose arguments are valid for the tool's schema
            [call] = result.tool_calls
            assert call.name == "query" and isinstance(call.arguments["question"], str)
            assert isinstance(call.arguments["limit"], int) and call.arguments["limit"] >= 1


@pytest.fixture
def llm_env(llama: ModelEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ODA_LLM_BASE_URL", llama.base_url)
    monkeypatch.setenv("ODA_LLM_MODEL", llama.model)
    yield


def test_doctor_reports_the_server(llm_env: None) -> None:
    report = diagnose(load_settings())
    assert report.usable, report.problems
    assert report.answers and "smollm2" in report.served
    assert (
        report.structured_mode == "json_object" and report.structured_source == "asked the server"
    )
    text = "\n".join(report.lines())
    assert "llama.cpp" in text and "context window: not reported" in text


def test_doctor_says_plainly_when_the_model_is_wrong(
    llama: ModelEndpoint, monkeypatch: pytest.MonkeyPatch, unused_port: int
) -> None:
    monkeypatch.setenv("ODA_LLM_BASE_URL", llama.base_url)
    monkeypatch.setenv("ODA_LLM_MODEL", "qwen-72b")
    wrong = diagnose(load_settings())
    assert not wrong.usable and "does not serve 'qwen-72b'" in wrong.problems[0]
    monkeypatch.setenv("ODA_LLM_BASE_URL", base_url(unused_port))
    down = diagnose(load_settings())
    assert not down.usable and not down.answers and "cannot reach" in down.problems[0]


# --- prompt budgets, on the model's own tokenizer ------------------------------------------------


def chatml_tokens(endpoint: ModelEndpoint, messages: list[dict[str, Any]]) -> int:
    """The prompt's size as the server's tokenizer counts it (ChatML, as the server renders)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    text += "<|im_start|>assistant\n"
    root = endpoint.base_url.removesuffix("/v1")
    reply = httpx.post(f"{root}/extras/tokenize/count", json={"input": text}, timeout=600)
    reply.raise_for_status()
    return int(reply.json()["count"])


def worst_prompts() -> dict[str, list[dict[str, Any]]]:
    """Each stage's largest conversation: the longest paper question, every reflection or
    repair turn the budgets allow."""

    question = (
        "Retrieve the GPU-0, GPU-1, GPU-2 and GPU-3 utilisation and the total power of jobs "
        "3423336, 4835969 and 3776044 on nodes 900 and 920 on 1 June 2022 from 08:00 to 15:00"
    )
    sparql = "SELECT ?a WHERE { ?a ?b ?c }\n" * 12  # a 12-line query
    reflect = prompts.reflection_turns({"plugin": "ipmi", "confidence": 0.5}, "below 0.7 " * 4)
    cat = load_catalogue()
    grounded = GroundedRequest(
        ("total_power", "Gpu0_gpu_utilization"), Entities(nodes=(900, 920), jobs=(3423336,)),
        parse_time(question, as_of=AS_OF).windows,
    )  # fmt: skip
    shots = [s.example for s in select_examples(question, load_examples(), 3)]
    sparql_prompt = prompts.sparql_messages(
        question, graph="https://w3id.org/oda-analyst/m100/graph/vkg/req-1",
        ontology_text=traversal_paths(start_classes(grounded, cat)).render(),
        grounding_text=describe_grounding(grounded, cat), examples=shots,
    )  # fmt: skip
    answer = {"role": "assistant", "content": sparql}
    retry = {"role": "user", "content": prompts.diagnostics_feedback(["[code] message"] * 4)}
    return {
        "time": prompts.time_messages(question, AS_OF),
        "intent": prompts.intent_messages(question) + reflect * 3,
        "decompose": prompts.decompose_messages(question, "multi", [question] * 3),
        "plugin": prompts.plugin_messages(question) + reflect * 3,
        "sparql": sparql_prompt + [answer, retry] * 2,
        "completeness": prompts.completeness_messages(question, sparql, ["a", "b", "c"]),
        "repair": [
            *prompts.repair_messages(question, sparql, ["missing projection: x"] * 4),
            answer,
            {"role": "user", "content": prompts.repair_feedback("it changed WHERE")},
        ],
    }


def test_every_stage_prompt_fits_its_budget(llama: ModelEndpoint) -> None:
    # The server adds its own preamble (chatml-function-calling: ~550 tokens); measure it once
    # with a one-token call, then count each stage's worst prompt on the model's tokenizer.
    with client(llama) as c:
        billed = c.chat(SAY, stage="calibrate", max_tokens=1).usage.prompt_tokens
    overhead = billed - chatml_tokens(llama, SAY)
    assert overhead >= 0
    sizes = {s: chatml_tokens(llama, m) + overhead for s, m in worst_prompts().items()}
    over = {s: (n, STAGE_BUDGETS[s].prompt_tokens) for s, n in sizes.items()
            if n > STAGE_BUDGETS[s].prompt_tokens}  # fmt: skip
    assert not over, f"prompts over budget (tokens, budget): {over}"
    assert set(sizes) == set(STAGE_BUDGETS)
    # Together, one question's prompts stay far below the 30,000-token goal per question.
    assert sum(sizes.values()) < 30_000
