"""A scripted OpenAI-compatible HTTP server on loopback, for protocol-level tests and benches.

It is not a model: it replays the replies it was given, in order, one per chat completion, and
records every request so a test can assert what the client sent (model, messages, schema
fields, tools). Replies can be content, tool calls, HTTP errors (with Retry-After), delays (for
timeouts), malformed bodies or a dropped connection. Usage numbers are whitespace word counts
(of the messages' contents, and of the reply's content and tool arguments) unless a step gives
its own: deterministic, not a tokenizer. Nothing here says anything about
answer quality.

    with ScriptedOpenAIServer([ScriptStep.reply('{"a": 1}')]) as server:
        client = LLMClient(server.base_url, server.model)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

LOOPBACK = "127.0.0.1"

Responder = Callable[[dict[str, Any]], "ScriptStep | dict[str, Any]"]
"""A step computed from the request body: a ``ScriptStep`` or a complete response body."""


@dataclass(frozen=True)
class ScriptStep:
    """One scripted reply to one ``POST /chat/completions``."""

    status: int = 200
    content: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any] | str], ...] = ()
    """(name, arguments); a string is sent verbatim, so invalid JSON can be scripted."""
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    """(prompt_tokens, completion_tokens); None: word counts of the request and the reply."""
    body: Any = None
    """A complete JSON body to send instead of one built from the fields above."""
    raw: bytes | None = None
    """Bytes sent as the body verbatim (e.g. malformed JSON)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    """Wait this long before answering (for client timeouts)."""
    drop: bool = False
    """Close the connection without any answer."""

    @classmethod
    def reply(
        cls,
        content: str,
        *,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "stop",
        delay_s: float = 0.0,
    ) -> ScriptStep:
        return cls(content=content, usage=usage, finish_reason=finish_reason, delay_s=delay_s)

    @classmethod
    def json_reply(cls, value: Any, *, usage: tuple[int, int] | None = None) -> ScriptStep:
        return cls.reply(json.dumps(value), usage=usage)

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: dict[str, Any] | str,
        *more: tuple[str, dict[str, Any] | str],
        content: str | None = None,
        usage: tuple[int, int] | None = None,
    ) -> ScriptStep:
        return cls(content=content, tool_calls=((name, arguments), *more), usage=usage)

    @classmethod
    def error(
        cls, status: int, message: str = "scripted error", *, retry_after: str | None = None
    ) -> ScriptStep:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        body = {"error": {"message": message, "type": "scripted_error", "code": status}}
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def malformed(cls, text: str = '{"choices": [') -> ScriptStep:
        return cls(raw=text.encode())

    @classmethod
    def disconnect(cls) -> ScriptStep:
        return cls(drop=True)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (headers with lower-case names)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float


class ScriptedOpenAIServer:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers from a script, in a thread."""

    def __init__(
        self,
        script: Iterable[ScriptStep | Responder] = (),
        *,
        model: str = "scripted-model",
        default: ScriptStep | Responder | None = None,
        api_key: str | None = None,
        port: int = 0,
    ) -> None:
        self.model = model
        self.default = default
        self.api_key = api_key
        self._script = list(script)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._port = port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root to give a client, ``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise RuntimeError("the scripted server is not started")
        return f"http://{LOOPBACK}:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_bodies(self) -> list[Any]:
        """The JSON bodies of every chat-completion request, in arrival order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def add(self, *steps: ScriptStep | Responder) -> None:
        with self._lock:
            self._script.extend(steps)

    def start(self) -> ScriptedOpenAIServer:
        httpd = _Server((LOOPBACK, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._stop.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a scripted delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- used by the handler thread --------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_step(self, body: Any) -> ScriptStep:
        with self._lock:
            step = self._script.pop(0) if self._script else self.default
        if step is None:
            return ScriptStep.error(400, "scripted server: the script is exhausted")
        if isinstance(step, ScriptStep):
            return step
        produced = step(body if isinstance(body, dict) else {})
        return produced if isinstance(produced, ScriptStep) else ScriptStep(body=produced)

    def _completion(self, step: ScriptStep, request: dict[str, Any]) -> dict[str, Any]:
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in step.tool_calls
        ]
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if calls:
            message["tool_calls"] = calls
        prompt, completion = step.usage or (
            sum(
                _words(m.get("content")) for m in request.get("messages", []) if isinstance(m, dict)
            ),
            _words(step.content) + sum(_words(c["function"]["arguments"]) for c in calls),
        )
        return {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": step.finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _words(value: Any) -> int:
    """Whitespace-separated words in every string inside ``value`` (a stand-in for tokens)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, the client's delayed ACK adds
    # ~40 ms to every reply on loopback, which would swamp the latencies a bench measures.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        owner = self._receive(None)
        if owner is None:
            return
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": owner.model, "object": "model", "owned_by": "scripted"}]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, _error_body(404, f"no route GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        owner = self._receive(body)
        if owner is None:
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error_body(404, f"no route POST {self.path}"))
            return
        if not isinstance(body, dict):
            self._send_json(400, _error_body(400, "the request body is not a JSON object"))
            return
        step = owner._next_step(body)
        if step.delay_s and owner._stop.wait(step.delay_s):
            self.close_connection = True
            return
        if step.drop:
            self.close_connection = True
            return
        if step.raw is not None:
            self._send_bytes(step.status, step.raw, step.headers)
        elif step.body is not None:
            self._send_json(step.status, step.body, step.headers)
        else:
            self._send_json(step.status, owner._completion(step, body), step.headers)

    def _receive(self, body: Any) -> ScriptedOpenAIServer | None:
        """Record the request; answer 401 (and return None) if the API key is wrong."""
        owner = self.server.owner
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner._record(RecordedRequest(self.command, self.path, headers, body, time.time()))
        if owner.api_key and headers.get("authorization") != f"Bearer {owner.api_key}":
            self._send_json(401, _error_body(401, "invalid API key"))
            return None
        return owner

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(body).encode(), headers)

    def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout fired)


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "scripted_error", "code": status}}
