"""The web UI's routes: sign-in, the answer stream, and that one user never reaches another's
conversation, artefact or feedback. The coordinator here is scripted (control flow only); the
browser test in tests/e2e drives the real one."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient

from oda_analyst.webui.answers import candidate_answer, without_paths
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history import History

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


class _Answer(BaseModel):
    status: str
    request_id: str
    summary: str
    understood_as: str | None = None
    artifacts: list[dict[str, Any]] = []
    clarification: dict[str, Any] | None = None


class ScriptedCoordinator:
    """Answers with a chart file, or asks which temperature when the question says 'temperature'."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.calls: list[tuple[str, str, str]] = []

    async def ask(self, question: str, *, user: str, as_of: datetime | None = None,
                  out_dir: Path | None = None, conversation_id: str | None = None,
                  progress: Any = None) -> _Answer:  # fmt: skip
        self.calls.append(("ask", question, user))
        progress("understanding the question")
        progress("building the graph")
        if "temperature" in question:
            candidates = [{"value": "ambient", "label": "Ambient"}, "inlet"]
            asked = {"question": "Which temperature?", "candidates": candidates}
            return _Answer(status="clarification", request_id=str(conversation_id),
                           summary="Which temperature? 1. ambient; 2. inlet",
                           clarification=asked)  # fmt: skip
        chart = self.out / f"{len(self.calls)}.png"
        chart.write_bytes(PNG)
        chart.with_suffix(".py").write_text("print('drawn')\n")
        files = [{"path": str(chart), "media_type": "image/png", "title": "P"}]
        return _Answer(status="completed", request_id=str(conversation_id), summary="done",
                       understood_as="power of node 900", artifacts=files)  # fmt: skip

    async def clarify(self, conversation_id: str, answer: str, *, user: str,
                      progress: Any = None) -> _Answer:  # fmt: skip
        self.calls.append(("clarify", answer, user))
        return _Answer(status="completed", request_id=conversation_id, summary=f"used {answer}")


@pytest.fixture
def app_parts(tmp_path: Path) -> tuple[Any, ScriptedCoordinator, History]:
    coordinator = ScriptedCoordinator(tmp_path)
    history = History(tmp_path / "history.sqlite")
    users = {"alice": hash_password("a-pass"), "bob": hash_password("b-pass")}
    return create_app(coordinator, users, history, secret="test"), coordinator, history


def form_token(page: str) -> str:
    """The CSRF token of a page's form."""
    found = re.search(r"name='csrftoken' value='([^']+)'", page)
    assert found, page
    return found.group(1)


def _signed_in(app: Any, user: str, password: str) -> TestClient:
    client = TestClient(app)
    r = client.post("/login", data={"user": user, "password": password}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return client


def _ask(client: TestClient, text: str, cid: str | None = None, clarify: bool = False) -> list[Any]:
    r = client.post("/api/ask", json={"text": text, "conversation_id": cid, "clarify": clarify})
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines()]


def test_sign_in_is_required_and_a_wrong_password_is_refused(app_parts: Any) -> None:
    app, _, _ = app_parts
    client = TestClient(app)
    assert client.get("/", follow_redirects=False).headers["location"] == "/login"
    assert client.post("/api/ask", json={"text": "x"}).status_code == 401
    r = client.post("/login", data={"user": "alice", "password": "b-pass"})
    assert r.status_code == 401 and "wrong password" in r.text


def test_an_answer_streams_its_steps_then_the_answer_and_is_stored(app_parts: Any) -> None:
    app, coordinator, _ = app_parts
    alice = _signed_in(app, "alice", "a-pass")
    events = _ask(alice, "power of node 900 and plot it")
    assert [e["type"] for e in events] == ["conversation", "progress", "progress", "answer"]
    message = events[-1]["message"]
    assert message["steps"] == ["understanding the question", "building the graph"]
    assert message["understood_as"] == "power of node 900"
    assert message["scripts"] == ["print('drawn')\n"]
    assert "artifact_paths" not in message  # server paths stay on the server
    assert coordinator.calls == [("ask", "power of node 900 and plot it", "alice")]
    png = alice.get(f"/artifacts/{message['id']}/0")
    assert png.status_code == 200 and png.content == PNG
    assert (
        "attachment"
        in alice.get(f"/artifacts/{message['id']}/0?download=1").headers["content-disposition"]
    )
    cid = events[0]["id"]
    stored = alice.get(f"/api/conversations/{cid}").json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]
    assert cid in alice.get("/").text


def test_another_user_gets_404_on_the_conversation_the_artefact_and_feedback(
    app_parts: Any,
) -> None:
    app, coordinator, _ = app_parts
    alice = _signed_in(app, "alice", "a-pass")
    events = _ask(alice, "power of node 900 and plot it")
    cid, mid = events[0]["id"], events[-1]["message"]["id"]
    bob = _signed_in(app, "bob", "b-pass")
    assert bob.get(f"/c/{cid}").status_code == 404
    assert bob.get(f"/api/conversations/{cid}").status_code == 404
    assert bob.get(f"/artifacts/{mid}/0").status_code == 404
    assert bob.post("/api/ask", json={"text": "more", "conversation_id": cid}).status_code == 404
    r = bob.post("/api/feedback", json={"message_id": mid, "score": "down", "comment": "x"})
    assert r.status_code == 404
    assert cid not in bob.get("/").text
    assert len(coordinator.calls) == 1  # bob's attempts never reached the coordinator


def test_a_clarification_is_answered_in_its_conversation(app_parts: Any) -> None:
    app, coordinator, _ = app_parts
    alice = _signed_in(app, "alice", "a-pass")
    events = _ask(alice, "temperature of node 900")
    message = events[-1]["message"]
    assert message["summary"] == "Which temperature?"
    clar = message["clarification"]
    assert clar["candidates"] == [["Ambient", "ambient"], ["inlet", "inlet"]]
    cid = events[0]["id"]
    again = _ask(alice, "ambient", cid, clarify=True)
    assert again[-1]["message"]["summary"] == "used ambient"
    assert coordinator.calls[-1] == ("clarify", "ambient", "alice")


def test_feedback_is_stored_with_the_request_id(app_parts: Any) -> None:
    app, _, history = app_parts
    alice = _signed_in(app, "alice", "a-pass")
    message = _ask(alice, "power of node 900 and plot it")[-1]["message"]
    r = alice.post("/api/feedback", json={"message_id": message["id"], "score": "down",
                                          "comment": "node 920 missing"})  # fmt: skip
    assert r.status_code == 200
    assert history.feedback(message["id"]) == (-1, "node 920 missing", message["request_id"])
    bad = alice.post("/api/feedback", json={"message_id": message["id"], "score": "meh"})
    assert bad.status_code == 400


def test_sign_out_ends_the_session(app_parts: Any) -> None:
    app, _, _ = app_parts
    alice = _signed_in(app, "alice", "a-pass")
    # the sign-out form carries its CSRF token: a form post without it signs no one out
    assert alice.post("/logout", follow_redirects=False).status_code == 403
    assert alice.post("/api/ask", json={"text": "x"}).status_code == 200
    token = form_token(alice.get("/").text)
    r = alice.post("/logout", data={"csrftoken": token}, follow_redirects=False)
    assert r.status_code == 303
    assert alice.post("/api/ask", json={"text": "x"}).status_code == 401


def test_server_paths_never_reach_the_page() -> None:
    text = "2,520 rows (written to /srv/oda/r/01a.csv). Chart: GPU 0 (/srv/r/f3/chart1-line.png)."
    assert without_paths(text) == "2,520 rows. Chart: GPU 0."
    assert without_paths("chart: /srv/oda/requests/f36/chart1-line.png") == "chart: chart1-line.png"
    assert without_paths("power of node 900, 08:00/09:00") == "power of node 900, 08:00/09:00"


def test_a_metric_candidate_is_answered_with_its_metric_name() -> None:
    candidate = {"metric": "ambient", "plugin": "ipmi", "score": 0.5, "description": "Inlet air"}
    assert candidate_answer(candidate) == ("ambient [ipmi] — Inlet air", "ambient")
    assert candidate_answer("inlet") == ("inlet", "inlet")


class _Overlap:
    """Counts how many requests run at once (each yields to the loop a few times)."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.users: list[str] = []

    async def ask(self, question: str, *, user: str, progress: Any = None,
                  **_: Any) -> _Answer:  # fmt: skip
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(20):
            await asyncio.sleep(0)
        self.users.append(user)
        self.running -= 1
        return _Answer(status="completed", request_id="r", summary=user)

    async def clarify(self, *args: Any, **kwargs: Any) -> _Answer:
        raise AssertionError("not used")


@pytest.mark.parametrize(("one_at_a_time", "most"), [(True, 1), (False, 2)])
def test_one_at_a_time_never_interleaves_two_users_requests(
    tmp_path: Path, one_at_a_time: bool, most: int
) -> None:
    coordinator = _Overlap()
    users = {"alice": hash_password("a"), "bob": hash_password("b")}
    app = create_app(coordinator, users, History(tmp_path / "h.sqlite"), secret="t",
                     one_at_a_time=one_at_a_time)  # fmt: skip

    async def both() -> list[str]:
        clients = []
        for user, password in (("alice", "a"), ("bob", "b")):
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            await client.post("/login", data={"user": user, "password": password})
            clients.append(client)
        replies = await asyncio.gather(*(c.post("/api/ask", json={"text": "q"}) for c in clients))
        for c in clients:
            await c.aclose()
        return [json.loads(r.text.splitlines()[-1])["message"]["summary"] for r in replies]

    assert asyncio.run(both()) == ["alice", "bob"]
    assert coordinator.most == most


def test_healthz_answers_without_a_session_and_reveals_nothing(app_parts: Any) -> None:
    app, coordinator, _ = app_parts
    client = TestClient(app)
    r = client.get("/healthz", follow_redirects=False)
    assert (r.status_code, r.text) == (200, "ok")
    assert "set-cookie" not in r.headers and coordinator.calls == []
    # the probe route is the only one open: the pages still send a stranger to sign in
    assert client.get("/", follow_redirects=False).status_code == 303
