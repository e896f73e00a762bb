"""The CRDs as they ship in crds/: valid CRDs for current Kubernetes, their schemas reject bad
specs, and their CEL rules (x-kubernetes-validations) decide as Kubernetes >= 1.25 would.

The API server these tests can run (1.20, tests/integration/operator) enforces the OpenAPI
schema but not CEL, which it drops; so the CEL rules are evaluated here with cel-python over
the same objects, and the CRDs are checked against the 1.30 schemas with kubernetes-validate.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml

CRDS = Path(__file__).resolve().parents[2] / "crds"
K8S = "1.30.0"


def _crd(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((CRDS / name).read_text()) if d]
    (doc,) = docs
    assert isinstance(doc, dict)
    return doc


QUERY = _crd("analystquery.yaml")
CACHE = _crd("vkgcache.yaml")


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _spec_rules(crd: dict[str, Any]) -> list[dict[str, str]]:
    rules: list[dict[str, str]] = _schema(crd)["properties"]["spec"]["x-kubernetes-validations"]
    return rules


def _errors(crd: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema(crd),
                                           format_checker=jsonschema.FormatChecker())  # fmt: skip
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(obj)]  # fmt: skip


def _cel_failures(crd: dict[str, Any], spec: dict[str, Any],
                  old: dict[str, Any] | None = None) -> list[str]:  # fmt: skip
    """The messages of the spec's CEL rules that fail; transition rules (``oldSelf``) only on
    an update, as Kubernetes evaluates them."""
    env = celpy.Environment()
    failed = []
    for rule in _spec_rules(crd):
        if "oldSelf" in rule["rule"] and old is None:
            continue
        program = env.program(env.compile(rule["rule"]))
        activation = {"self": celpy.json_to_cel(spec)}
        if old is not None:
            activation["oldSelf"] = celpy.json_to_cel(old)
        if not bool(program.evaluate(activation)):
            failed.append(rule["message"])
    return failed


def _query(**spec: Any) -> dict[str, Any]:
    base = {"question": "Retrieve the total power of node 900 on 1 June 2022", "user": "alice"}
    return {"apiVersion": "oda-analyst.dev/v1alpha1", "kind": "AnalystQuery",
            "metadata": {"name": "q"}, "spec": {**base, **spec}}  # fmt: skip


@pytest.mark.parametrize("crd", [QUERY, CACHE], ids=["AnalystQuery", "VKGCache"])
def test_crds_are_valid_for_current_kubernetes(crd: dict[str, Any]) -> None:
    kubernetes_validate.validate(crd, K8S, strict=True)
    names = crd["spec"]["names"]
    assert crd["spec"]["group"] == "oda-analyst.dev" and names["categories"] == ["oda"]
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}


def test_short_names_and_printer_columns() -> None:
    assert QUERY["spec"]["names"]["shortNames"] == ["aq"]
    assert CACHE["spec"]["names"]["shortNames"] == ["vkgc"]
    cols = [c["name"] for c in QUERY["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert cols == ["Phase", "Stage", "User", "Age"]
    cols = [c["name"] for c in CACHE["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert cols == ["Phase", "Triples", "Size", "Last Access", "Age"]


def test_a_full_query_is_valid() -> None:
    obj = _query(referenceTime="2022-06-15T00:00:00Z", backend="oda",
                 model={"baseUrl": "http://vllm:8000/v1", "name": "qwen"},
                 timeouts={"totalSeconds": 600, "stageSeconds": 300},
                 clarifications=["ambient"], analysis="auto")  # fmt: skip
    assert _errors(QUERY, obj) == []
    assert _cel_failures(QUERY, obj["spec"]) == []


@pytest.mark.parametrize("backend", ["oda", "sota1", "sota2"])
def test_every_backend_the_cli_offers_is_a_valid_spec(backend: str) -> None:
    assert _errors(QUERY, _query(backend=backend)) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"user": None}, "spec: 'user' is a required property"),
        ({"question": "hi"}, "spec.question"),
        ({"user": "alice smith"}, "spec.user"),
        ({"referenceTime": "yesterday"}, "spec.referenceTime"),
        ({"backend": "chatgpt"}, "spec.backend"),
        ({"timeouts": {"totalSeconds": 1}}, "spec.timeouts.totalSeconds"),
        ({"schedule": "every hour"}, "spec.schedule"),
        ({"model": {"baseUrl": "ftp://x"}}, "spec.model"),
    ],
)
def test_schema_rejects_bad_specs(change: dict[str, Any], where: str) -> None:
    obj = _query()
    for key, value in change.items():
        if value is None:
            del obj["spec"][key]
        else:
            obj["spec"][key] = value
    errors = _errors(QUERY, obj)
    assert any(e.startswith(where) for e in errors), errors


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schedule": "0 * * * *", "clarifications": ["ambient"]}, "a scheduled query cannot"),
        ({"historyLimit": 3}, "historyLimit applies only to a scheduled query"),
        ({"timeouts": {"totalSeconds": 60, "stageSeconds": 120}}, "timeouts.stageSeconds must not"),
    ],
)
def test_cel_rules_reject_what_spans_fields(spec: dict[str, Any], message: str) -> None:
    obj = _query(**spec)
    assert _errors(QUERY, obj) == []  # the schema alone lets it through (as 1.20 does)
    failures = _cel_failures(QUERY, obj["spec"])
    assert len(failures) == 1 and failures[0].startswith(message), failures


def test_cel_rules_accept_their_valid_neighbours() -> None:
    for spec in ({"schedule": "0 * * * *", "historyLimit": 3},
                 {"timeouts": {"totalSeconds": 120, "stageSeconds": 120}},
                 {"timeouts": {"stageSeconds": 30}}):  # fmt: skip
        assert _cel_failures(QUERY, _query(**spec)["spec"]) == [], spec


def test_question_and_cache_key_are_immutable() -> None:
    old = _query()["spec"]
    new = copy.deepcopy(old)
    assert _cel_failures(QUERY, new, old) == []
    new["question"] = "something else entirely"
    assert _cel_failures(QUERY, new, old) == [
        "spec.question is immutable: create a new AnalystQuery for another question"
    ]
    cache = {"key": "ab" * 16, "request": {}, "lake": {"uri": "s3://l/x"}, "owner": "alice"}
    moved = {**cache, "key": "cd" * 16}
    assert _cel_failures(CACHE, moved, cache) == [
        "spec.key is immutable: a different request is a different VKGCache"
    ]


def test_cache_schema() -> None:
    good = {"apiVersion": "oda-analyst.dev/v1alpha1", "kind": "VKGCache",
            "metadata": {"name": "vkg-x"},
            "spec": {"key": "ab" * 16, "request": {"target": "readings"},
                     "lake": {"uri": "s3://m100/lake", "fingerprint": "x"}, "owner": "alice",
                     "ttlSeconds": 3600}}  # fmt: skip
    assert _errors(CACHE, good) == []
    bad = copy.deepcopy(good)
    bad["spec"]["key"] = "not-a-hash"
    bad["spec"]["ttlSeconds"] = 5
    errors = _errors(CACHE, bad)
    assert any(e.startswith("spec.key") for e in errors)
    assert any(e.startswith("spec.ttlSeconds") for e in errors)
