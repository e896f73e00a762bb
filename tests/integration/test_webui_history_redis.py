"""The web UI's history in a real redis-server on loopback: the store contract, then the UI
itself over it, resumed after both the UI's store and the Redis server restart."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from starlette.testclient import TestClient

from integration.test_checkpoint_redis import RedisServer, _free_port
from oda_analyst.errors import StoreError
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history_redis import RedisHistory
from unit.test_webui_history_contract import HistoryContract, StoreFactory

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(_free_port())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}:ui"


class TestRedisHistory(HistoryContract):
    @pytest.fixture()
    def make_store(self, redis_server: RedisServer, prefix: str) -> Iterator[StoreFactory]:
        opened: list[RedisHistory] = []

        def make() -> RedisHistory:
            opened.append(RedisHistory(redis_server.url, prefix=prefix))
            return opened[-1]

        yield make
        for store in opened:
            store.close()


def test_keys_stay_under_the_prefix(redis_server: RedisServer, prefix: str) -> None:
    store = RedisHistory(redis_server.url, prefix=prefix)
    conv = store.create_conversation("alice", "q")
    store.add_message(conv.id, "user", {"text": "q"})
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        keys = set(raw.scan_iter("*"))
        mine = {k for k in keys if k.startswith(prefix + ":")}
        assert mine == {
            f"{prefix}:conv:{conv.id}",
            f"{prefix}:user:alice",
            f"{prefix}:msgs:{conv.id}",
            *(f"{prefix}:msg:{m.id}" for m in store.messages("alice", conv.id)),
        }
        assert all(raw.ttl(k) == -1 for k in mine)  # history does not expire
    finally:
        raw.close()
        store.close()


def test_an_unreachable_redis_is_a_store_error_with_a_hint() -> None:
    with pytest.raises(StoreError) as err:
        RedisHistory(f"redis://:secret@127.0.0.1:{_free_port()}/0", timeout_s=1)
    assert err.value.hint and "ODA_UI_HISTORY" in err.value.hint
    assert "secret" not in str(err.value)


class Answers:
    """A coordinator answering from a script (the routes' control flow is under test here)."""

    async def ask(self, question: str, *, user: str, progress: Any = None, **_: Any) -> Any:
        progress("understanding the question")
        return _Answer(question)

    async def clarify(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no clarification here")


class _Answer:
    def __init__(self, question: str) -> None:
        self.question = question

    def model_dump(self) -> dict[str, Any]:
        return {"status": "completed", "request_id": "req-1", "summary": f"about {self.question}",
                "trace": "/srv/traces/" + "ab" * 16 + ".json"}  # fmt: skip


def test_the_ui_resumes_its_conversations_after_a_restart(tmp_path: Path) -> None:
    """The UI and the Redis server both restart (Redis with its append-only file on): the
    conversation, its answer and its feedback are all still there for their user only."""
    port = _free_port()
    persist = ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(tmp_path)]
    server = RedisServer(port, extra=persist)
    users = {"alice": hash_password("a"), "bob": hash_password("b")}
    try:
        store = RedisHistory(server.url)
        with TestClient(create_app(Answers(), users, store, secret="k")) as ui:
            ui.post("/login", data={"user": "alice", "password": "a"}, follow_redirects=False)
            stream = ui.post("/api/ask", json={"text": "GPU-0 of node 900"}).text.splitlines()
            events = [json.loads(line) for line in stream]
            assert [e["type"] for e in events] == ["conversation", "progress", "answer"]
            cid = events[0]["id"]
            answer = ui.get(f"/api/conversations/{cid}").json()["messages"][-1]
            assert answer["trace_id"] == "ab" * 16
            ok = ui.post("/api/feedback", json={"message_id": answer["id"], "score": "down",
                                                 "comment": "wrong node"})  # fmt: skip
            assert ok.status_code == 200
        store.close()
    finally:
        server.stop()
    server = RedisServer(port, extra=persist)
    try:
        store = RedisHistory(server.url)
        with TestClient(create_app(Answers(), users, store, secret="k2")) as ui:
            ui.post("/login", data={"user": "alice", "password": "a"}, follow_redirects=False)
            page = ui.get(f"/c/{cid}")
            assert page.status_code == 200 and "GPU-0 of node 900" in page.text
            messages = ui.get(f"/api/conversations/{cid}").json()["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant"]
            assert messages[1]["summary"] == "about GPU-0 of node 900"
            assert store.feedback(messages[1]["id"]) == (-1, "wrong node", "req-1")
            # the sign-out and sign-in forms repeat the CSRF token their cookie holds (issue 31)
            token = ui.cookies["oda_csrf"]
            assert ui.post("/logout", data={"csrftoken": token}).status_code == 200
            bob = {"user": "bob", "password": "b", "csrftoken": token}
            assert ui.post("/login", data=bob, follow_redirects=False).status_code == 303
            assert ui.get(f"/c/{cid}").status_code == 404
        store.close()
    finally:
        server.stop()


def test_redis_going_down_is_a_readable_503_not_a_traceback() -> None:
    server = RedisServer(_free_port())
    users = {"alice": hash_password("a")}
    store = RedisHistory(server.url, timeout_s=1)
    try:
        with TestClient(create_app(Answers(), users, store, secret="k")) as ui:
            ui.post("/login", data={"user": "alice", "password": "a"}, follow_redirects=False)
            assert ui.get("/").status_code == 200
            server.stop()
            page = ui.get("/")
            assert page.status_code == 503
            assert "did not answer" in page.text and "Traceback" not in page.text
            api = ui.post("/api/ask", json={"text": "GPU-0 of node 900"})
            assert api.status_code == 503 and api.json()["hint"]
    finally:
        store.close()
        server.stop()
