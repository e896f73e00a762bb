from __future__ import annotations

from pathlib import Path

import pytest

from oda_analyst.config import describe_settings, load_settings
from oda_analyst.errors import ConfigError


def test_env_prefix_and_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ODA_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ODA_LAKE", raising=False)
    settings = load_settings()
    assert settings.data_dir == tmp_path
    assert settings.lake_location == str(tmp_path / "lake")
    assert settings.llm_base_url is None
    assert settings.redis_url is None


def test_s3_storage_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODA_LAKE", "s3://bucket/lake")
    monkeypatch.setenv("ODA_S3_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("ODA_S3_ACCESS_KEY", "ak")
    monkeypatch.setenv("ODA_S3_SECRET_KEY", "sk")
    opts = load_settings().storage_options()
    assert opts["aws_endpoint_url"] == "http://127.0.0.1:9000"
    assert opts["aws_allow_http"] == "true"
    assert opts["aws_access_key_id"] == "ak"


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [("ODA_ROW_LIMIT", "0", "ODA_ROW_LIMIT"), ("ODA_LAKE", "http://x/y", "ODA_LAKE")],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, named: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert named in info.value.message
    assert info.value.exit_code == 2
    assert info.value.hint


def test_every_field_is_documented() -> None:
    text = describe_settings()
    for name in ("ODA_LAKE", "ODA_DATA_DIR", "ODA_LLM_BASE_URL", "ODA_LLM_MODEL", "ODA_REDIS_URL"):
        assert name in text
    assert "None" not in text


def test_redis_password_is_folded_into_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    # The chart gives the password from a Secret as its own variable; the clients read the URL.
    monkeypatch.setenv("ODA_REDIS_URL", "redis://redis.oda:6379/0")
    monkeypatch.setenv("ODA_REDIS_PASSWORD", "p@ss:w/rd")
    url = load_settings().redis_url
    assert url == "redis://:p%40ss%3Aw%2Frd@redis.oda:6379/0"
    import redis  # noqa: PLC0415  (only this test needs the client)

    kwargs = redis.connection.parse_url(url)
    assert kwargs["password"] == "p@ss:w/rd"
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("redis.oda", 6379, 0)


def test_redis_password_keeps_a_user_and_yields_to_the_urls_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ODA_REDIS_PASSWORD", "secret")
    monkeypatch.setenv("ODA_REDIS_URL", "rediss://analyst@redis:6380/2")
    assert load_settings().redis_url == "rediss://analyst:secret@redis:6380/2"
    monkeypatch.setenv("ODA_REDIS_URL", "redis://:inline@redis:6379/0")
    assert load_settings().redis_url == "redis://:inline@redis:6379/0"
    monkeypatch.delenv("ODA_REDIS_URL")
    assert load_settings().redis_url is None  # a password alone names no Redis


def test_redis_password_needs_a_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODA_REDIS_PASSWORD", "secret")
    monkeypatch.setenv("ODA_REDIS_URL", "unix:///run/redis.sock")
    with pytest.raises(ConfigError, match="ODA_REDIS_URL"):
        load_settings()
