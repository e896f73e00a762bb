"""The web UI's credentials and history store, on real argon2 hashes and a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from oda_analyst.errors import ConfigError
from oda_analyst.webui.auth import hash_password, load_credentials, parse_credentials, verify
from oda_analyst.webui.history import History


def test_a_hashed_password_verifies_and_nothing_else_does(tmp_path: Path) -> None:
    file = tmp_path / "users"
    file.write_text(f"# operators\nalice:{hash_password('s3cret')}\n", encoding="utf-8")
    users = load_credentials(file, f"bob:{hash_password('hunter2')}")
    assert set(users) == {"alice", "bob"}
    assert "s3cret" not in file.read_text()
    assert verify(users, "alice", "s3cret")
    assert verify(users, "bob", "hunter2")
    assert not verify(users, "alice", "hunter2")
    assert not verify(users, "carol", "s3cret")


@pytest.mark.parametrize("text", ["alice:plain-password", "no-colon", "bad user:$argon2id$x"])
def test_an_entry_that_is_not_a_user_and_an_argon2_hash_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="user:<argon2 hash>"):
        parse_credentials(text, source="test")


def test_no_users_at_all_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no user may sign in"):
        load_credentials(None, None)
    with pytest.raises(ConfigError, match="does not exist"):
        load_credentials(tmp_path / "missing", None)


def test_history_is_per_user_and_survives_a_reopen(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    store = History(db)
    conv = store.create_conversation("alice", "power of node 900")
    store.add_message(conv.id, "user", {"text": "power of node 900"})
    answer = store.add_message(conv.id, "assistant", {"status": "completed", "request_id": "r1"})
    store.set_feedback("alice", answer.id, "r1", -1, "wrong node")
    store.close()

    again = History(db)
    assert [c.id for c in again.conversations("alice")] == [conv.id]
    assert again.conversations("bob") == []
    assert again.conversation("bob", conv.id) is None
    assert again.messages("bob", conv.id) == []
    assert again.message("bob", answer.id) is None
    assert [m.role for m in again.messages("alice", conv.id)] == ["user", "assistant"]
    assert again.feedback(answer.id) == (-1, "wrong node", "r1")
