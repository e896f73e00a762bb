"""What every web UI history store must do (SQLite here; Redis in
tests/integration/test_webui_history_redis.py): per-user reads, order, feedback, and the same
conversations after the store is opened again (a restart of the UI)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oda_analyst.webui.history import History
from oda_analyst.webui.store import HistoryStore

StoreFactory = Callable[[], HistoryStore]


class HistoryContract:
    """Subclasses provide ``make_store``: each call opens the *same* store anew."""

    def test_each_user_sees_only_their_own(self, make_store: StoreFactory) -> None:
        store = make_store()
        mine = store.create_conversation("alice", "GPU-0 of node 900")
        theirs = store.create_conversation("bob", "Power of rack 3")
        m = store.add_message(mine.id, "user", {"text": "GPU-0 of node 900"})
        assert [c.id for c in store.conversations("alice")] == [mine.id]
        assert [c.id for c in store.conversations("bob")] == [theirs.id]
        assert store.conversation("bob", mine.id) is None
        assert store.messages("bob", mine.id) == []
        assert store.message("bob", m.id) is None
        assert store.conversation("alice", "no-such-id") is None
        assert store.message("alice", m.id) == m

    def test_conversations_newest_first_messages_in_order(self, make_store: StoreFactory) -> None:
        store = make_store()
        first = store.create_conversation("carol", "first")
        second = store.create_conversation("carol", "second")
        assert [c.title for c in store.conversations("carol")] == ["second", "first"]
        added = [store.add_message(first.id, r, {"n": i}) for i, r in enumerate("uaua")]
        got = store.messages("carol", first.id)
        assert [m.id for m in got] == [m.id for m in added]
        assert [m.payload["n"] for m in got] == [0, 1, 2, 3]
        assert [m.role for m in got] == ["u", "a", "u", "a"]
        assert store.messages("carol", second.id) == []

    def test_titles_are_cut_and_payloads_round_trip(self, make_store: StoreFactory) -> None:
        store = make_store()
        conv = store.create_conversation("dave", "x" * 500)
        assert len(conv.title) == 120
        payload = {"summary": "2,520 rows", "rows": [[1, 2.5, None]], "nested": {"ok": True}}
        msg = store.add_message(conv.id, "assistant", payload)
        assert store.message("dave", msg.id)
        assert store.messages("dave", conv.id)[0].payload == payload

    def test_feedback_replaces_and_keeps_the_request_id(self, make_store: StoreFactory) -> None:
        store = make_store()
        conv = store.create_conversation("erin", "q")
        msg = store.add_message(conv.id, "assistant", {"request_id": "r-1"})
        assert store.feedback(msg.id) is None
        store.set_feedback("erin", msg.id, "r-1", 1, "right")
        store.set_feedback("erin", msg.id, "r-1", -1, "no: wrong node")
        assert store.feedback(msg.id) == (-1, "no: wrong node", "r-1")
        other = store.add_message(conv.id, "assistant", {})
        store.set_feedback("erin", other.id, None, 1, "")
        assert store.feedback(other.id) == (1, "", None)

    def test_history_survives_reopening(self, make_store: StoreFactory) -> None:
        store = make_store()
        conv = store.create_conversation("frank", "before the restart")
        msg = store.add_message(conv.id, "assistant", {"summary": "kept"})
        store.set_feedback("frank", msg.id, "r-9", 1, "good")
        store.close()
        again = make_store()
        assert [c.title for c in again.conversations("frank")] == ["before the restart"]
        assert again.messages("frank", conv.id)[0].payload == {"summary": "kept"}
        assert again.feedback(msg.id) == (1, "good", "r-9")


class TestSqliteHistory(HistoryContract):
    @pytest.fixture()
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        opened: list[History] = []

        def make() -> History:
            opened.append(History(tmp_path / "history.sqlite"))
            return opened[-1]

        yield make
        for store in opened:
            store.close()
