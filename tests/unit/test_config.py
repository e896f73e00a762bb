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
