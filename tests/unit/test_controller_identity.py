"""The identity webhook's decisions (controller/identity.py) on the requests the API server
sends: who a new query runs as, which updates are refused, which model endpoints are allowed.
The same decisions on the real API server with two users: tests/integration/operator/
test_identity_webhook.py."""

from __future__ import annotations

from typing import Any

import pytest

from oda_analyst.config import Settings
from oda_analyst.controller.identity import (
    AdmissionRefusedError,
    Policy,
    check_model,
    check_update,
    user_on_create,
)

OPERATOR = "system:serviceaccount:oda:oda-oda-analyst-operator"
OWN = "http://oda-oda-analyst-vllm-qwen:8000/v1"
POLICY = Policy(trusted_creators=frozenset({OPERATOR}), model_urls=frozenset({OWN}))


def _obj(**spec: Any) -> dict[str, Any]:
    return {"spec": {"question": "the power of node 900 yesterday", **spec}}


def test_a_new_query_runs_as_its_creator() -> None:
    assert user_on_create({}, "alice", POLICY) == "alice"
    assert user_on_create({"user": "alice"}, "alice", POLICY) == "alice"
    with pytest.raises(AdmissionRefusedError, match=r"spec\.user is 'bob', but you are 'alice'"):
        user_on_create({"user": "bob"}, "alice", POLICY)


def test_a_name_that_cannot_own_a_query_is_refused_with_what_to_do() -> None:
    with pytest.raises(AdmissionRefusedError) as refused:
        user_on_create({}, "system:serviceaccount:ci:runner", POLICY)
    assert "cannot own a query" in refused.value.message
    assert refused.value.hint is not None and "webhook.trustedCreators" in refused.value.hint


def test_only_a_trusted_creator_writes_another_users_name() -> None:
    assert user_on_create({"user": "bob"}, OPERATOR, POLICY) == "bob"
    with pytest.raises(AdmissionRefusedError, match="must name one"):
        user_on_create({}, OPERATOR, POLICY)


def test_spec_user_never_changes_and_other_fields_may() -> None:
    before = _obj(user="alice")
    check_update(before, _obj(user="alice", clarifications=["ambient"]), POLICY)
    with pytest.raises(AdmissionRefusedError, match=r"spec\.user cannot change"):
        check_update(before, _obj(user="bob"), POLICY)
    with pytest.raises(AdmissionRefusedError, match=r"spec\.user cannot change"):
        check_update(before, _obj(), POLICY)


@pytest.mark.parametrize("url", [OWN, OWN + "/", "HTTP://ODA-oda-analyst-vllm-qwen:8000/v1"])
def test_the_releases_own_model_is_allowed(url: str) -> None:
    check_model(_obj(model={"baseUrl": url, "name": "qwen"})["spec"], POLICY)


@pytest.mark.parametrize("url", ["https://models.example.net/v1",
                                 "http://oda-oda-analyst-vllm-qwen:8000/v1/../../evil",
                                 "http://oda-oda-analyst-vllm-qwen:8000"])  # fmt: skip
def test_any_other_model_endpoint_is_refused(url: str) -> None:
    with pytest.raises(AdmissionRefusedError, match="not an allowed model endpoint") as refused:
        check_model(_obj(model={"baseUrl": url, "name": "qwen"})["spec"], POLICY)
    assert refused.value.hint is not None and OWN in refused.value.hint


def test_an_endpoint_is_checked_when_it_changes_not_on_every_update() -> None:
    """An existing query keeps passing the operator's own writes (finalizers, annotations) after
    the allowlist changed; moving it to another endpoint is refused."""
    old = _obj(user="alice", model={"baseUrl": "https://retired.example.net/v1", "name": "q"})
    check_update(old, {**old, "metadata": {"finalizers": ["oda-analyst.dev/cleanup"]}}, POLICY)
    with pytest.raises(AdmissionRefusedError):
        check_update(_obj(user="alice"), old, POLICY)


def test_no_allowed_endpoint_refuses_every_override() -> None:
    none = Policy(trusted_creators=frozenset(), model_urls=frozenset())
    with pytest.raises(AdmissionRefusedError) as refused:
        check_model({"model": {"baseUrl": OWN, "name": "qwen"}}, none)
    assert refused.value.hint is not None and "no override" in refused.value.hint


def test_the_policy_reads_the_operators_settings() -> None:
    settings = Settings(webhook_trusted_creators=f" {OPERATOR} , ci ",
                        webhook_model_urls=f"{OWN}/,https://Models.example.org/v1")  # fmt: skip
    assert Policy.from_settings(settings) == Policy(
        trusted_creators=frozenset({OPERATOR, "ci"}),
        model_urls=frozenset({OWN, "https://models.example.org/v1"}),
    )
