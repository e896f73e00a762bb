"""Feedback to LangFuse as a score, through the real ``langfuse`` SDK, against a loopback HTTP
server that records what the SDK posts (no LangFuse here). LangFuse down or broken must never
lose the feedback the UI's own store keeps.

The SDK keeps one set of background resources per public key in a process, so each test uses
a key of its own (as one UI process uses one LangFuse project).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from starlette.testclient import TestClient

from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history import History
from oda_analyst.webui.langfuse_feedback import SCORE_NAME, Feedback, LangfuseFeedback
from oidc_provider import free_port

pytestmark = pytest.mark.integration

TRACE = "0123456789abcdef0123456789abcdef"


class Recorder(ThreadingHTTPServer):
    """Answers every POST as LangFuse's score endpoint does (202 Accepted) and keeps it."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.posts.append(
            {"path": self.path, "auth": self.headers.get("authorization"), "body": json.loads(body)}
        )
        out = json.dumps({"message": "Accepted"}).encode()
        self.send_response(202)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _keys() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"pk-lf-{tag}", f"sk-lf-{tag}"


def _scores(recorder: Recorder) -> list[dict[str, Any]]:
    return [s for p in recorder.posts if p["path"] == "/api/public/scores" for s in p["body"]]


def test_a_feedback_arrives_as_a_score_on_its_trace(recorder: Recorder) -> None:
    public, secret = _keys()
    before = trace.get_tracer_provider()
    sender = LangfuseFeedback(recorder.url, public, secret)
    # The SDK runs on a provider of its own: the process's spans are not sent twice.
    assert trace.get_tracer_provider() is before
    try:
        sent = sender.send(Feedback("m" * 32, "alice", "req-7", TRACE, -1, "node 920 is wrong"))
        assert sent
        sender.flush()
    finally:
        sender.close()
    [score] = _scores(recorder)
    assert score["name"] == SCORE_NAME
    assert score["value"] == -1.0 and score["dataType"] == "NUMERIC"
    assert score["comment"] == "node 920 is wrong"
    assert score["traceId"] == TRACE
    assert score["id"] == "m" * 32  # the answer's message: a changed mind replaces the score
    assert score["metadata"] == {"request_id": "req-7", "user": "alice"}
    auth = next(p["auth"] for p in recorder.posts if p["path"] == "/api/public/scores")
    assert auth == "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()


def test_without_a_trace_id_nothing_is_sent(recorder: Recorder) -> None:
    sender = LangfuseFeedback(recorder.url, *_keys())
    try:
        assert not sender.send(Feedback("m1", "alice", "req-1", None, 1, ""))
        assert not sender.send(Feedback("m2", "alice", "req-1", "not-a-trace", 1, ""))
        sender.flush()
    finally:
        sender.close()
    assert _scores(recorder) == []


class _Answer:
    def model_dump(self) -> dict[str, Any]:
        return {"status": "completed", "request_id": "req-42", "summary": "2,520 rows",
                "trace": f"/srv/oda/traces/{TRACE}.json"}  # fmt: skip


class Answers:
    """A coordinator answering from a script (the feedback route is under test)."""

    async def ask(self, question: str, **_: Any) -> Any:
        return _Answer()

    async def clarify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no clarification here")


def _answer_and_rate(ui: TestClient, comment: str) -> tuple[str, Any]:
    ui.post("/login", data={"user": "alice", "password": "a"}, follow_redirects=False)
    events = [json.loads(x) for x in ui.post("/api/ask", json={"text": "Q3"}).text.splitlines()]
    message = events[-1]["message"]
    reply = ui.post(
        "/api/feedback", json={"message_id": message["id"], "score": "up", "comment": comment}
    )
    return message["id"], reply


def test_the_ui_sends_its_feedback_with_the_requests_trace(
    recorder: Recorder, tmp_path: Path
) -> None:
    sender = LangfuseFeedback(recorder.url, *_keys())
    history = History(tmp_path / "h.sqlite")
    users = {"alice": hash_password("a")}
    try:
        app = create_app(Answers(), users, history, secret="k", feedback_sink=sender.send)
        with TestClient(app) as ui:
            mid, reply = _answer_and_rate(ui, "right figures")
        assert reply.status_code == 200 and reply.json()["forwarded"] is True
        sender.flush()
        assert history.feedback(mid) == (1, "right figures", "req-42")
    finally:
        sender.close()
        history.close()
    [score] = _scores(recorder)
    assert (score["traceId"], score["value"], score["comment"]) == (TRACE, 1.0, "right figures")


def test_langfuse_down_never_loses_the_feedback(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sender = LangfuseFeedback(down, *_keys(), timeout_s=1)
    history = History(tmp_path / "h.sqlite")
    users = {"alice": hash_password("a")}
    try:
        app = create_app(Answers(), users, history, secret="k", feedback_sink=sender.send)
        with TestClient(app) as ui:
            mid, reply = _answer_and_rate(ui, "kept anyway")
        assert reply.status_code == 200 and reply.json()["ok"] is True
        sender.flush()  # the SDK gives up after its retries; nothing raises
        assert history.feedback(mid) == (1, "kept anyway", "req-42")
    finally:
        sender.close()
        history.close()


def test_a_broken_sink_never_loses_the_feedback(tmp_path: Path) -> None:
    def broken(_: Feedback) -> bool:
        raise RuntimeError("LangFuse client exploded")

    history = History(tmp_path / "h.sqlite")
    try:
        app = create_app(
            Answers(), {"alice": hash_password("a")}, history, secret="k", feedback_sink=broken
        )
        with TestClient(app) as ui:
            mid, reply = _answer_and_rate(ui, "still here")
        assert reply.status_code == 200 and reply.json()["forwarded"] is False
        assert history.feedback(mid) == (1, "still here", "req-42")
    finally:
        history.close()
