"""``oda-analyst ui``'s wiring: which history store and sign-in the settings choose, and the
setting to fix when one is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from starsessions.stores.redis import RedisStore

from oda_analyst.config import load_settings
from oda_analyst.errors import ConfigError
from oda_analyst.webui.history import History
from oda_analyst.webui.serve import oidc_login, open_history, open_sessions


def test_sqlite_by_default(tmp_path: Path) -> None:
    store = open_history(load_settings(data_dir=tmp_path))
    try:
        assert isinstance(store, History)
        assert (tmp_path / "webui" / "history.sqlite").is_file()
    finally:
        store.close()


@pytest.mark.parametrize(("kind", "setting"), [("redis", "ODA_REDIS_URL"),
                                               ("postgres", "ODA_UI_POSTGRES_URL")])  # fmt: skip
def test_a_cluster_store_without_its_url_names_the_setting(
    tmp_path: Path, kind: str, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ODA_REDIS_URL", raising=False)
    monkeypatch.delenv("ODA_UI_POSTGRES_URL", raising=False)
    with pytest.raises(ConfigError) as err:
        open_history(load_settings(data_dir=tmp_path, ui_history=kind))
    assert err.value.hint and setting in err.value.hint


def test_oidc_only_when_asked_and_complete(tmp_path: Path) -> None:
    assert oidc_login(load_settings(data_dir=tmp_path)) is None
    with pytest.raises(ConfigError, match="issuer"):
        oidc_login(load_settings(data_dir=tmp_path, ui_auth="oidc"))
    login = oidc_login(
        load_settings(
            data_dir=tmp_path,
            ui_auth="both",
            ui_oidc_issuer="https://idp.example.org",
            ui_oidc_client_id="oda",
            ui_oidc_label="Site SSO",
        )
    )
    assert login is not None and login.config.label == "Site SSO"
    assert login.config.user_claim == "preferred_username"


def test_sessions_live_beside_a_redis_history_and_in_memory_otherwise(tmp_path: Path) -> None:
    assert open_sessions(load_settings(data_dir=tmp_path)) is None
    settings = load_settings(
        data_dir=tmp_path, ui_history="redis", redis_url="redis://127.0.0.1:1/0"
    )
    store = open_sessions(settings)
    assert isinstance(store, RedisStore)
    assert store.prefix("abc") == f"{settings.ui_redis_prefix}:session:abc"
