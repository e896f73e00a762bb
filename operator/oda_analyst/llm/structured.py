"""Checking a model's JSON answer against a JSON Schema (and optionally a pydantic model).

Constrained decoding should make these checks pass, but servers differ (strict mode ignored,
unsupported keywords silently dropped, output cut at max_tokens), so the answer is always checked
here and every violation is named with its JSON path, ready to be shown to the model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from oda_analyst.llm.errors import LLMError, LLMOutputError
from oda_analyst.llm.types import ChatResult

MAX_LISTED_ERRORS = 8
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def check_schema(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for ``schema``; a broken schema is our bug, reported as such."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise LLMError(
            f"the JSON Schema sent to the model is invalid: {exc.message}",
            hint="this is a bug in the caller's schema, not in the model's answer",
        ) from None
    return Draft202012Validator(schema)


def parse_json(text: str | None) -> tuple[Any, str | None]:
    """The JSON value in ``text`` and None, or None and why it is not JSON.

    A single Markdown code fence around the JSON is tolerated: models without constrained
    decoding often add one, and it carries no meaning.
    """
    if text is None or not text.strip():
        return None, "the answer is empty; expected a JSON value"
    fenced = _FENCE.match(text)
    body = fenced.group("body") if fenced else text
    try:
        return json.loads(body), None
    except json.JSONDecodeError as exc:
        return (
            None,
            f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        )


def schema_errors(instance: Any, validator: Draft202012Validator) -> tuple[str, ...]:
    """Every schema violation as ``"<json path>: <message>"``, most specific first, bounded."""
    found = sorted(validator.iter_errors(instance), key=lambda e: (list(e.path), e.message))
    listed = tuple(f"{err.json_path}: {err.message}" for err in found[:MAX_LISTED_ERRORS])
    if len(found) > MAX_LISTED_ERRORS:
        listed += (f"... and {len(found) - MAX_LISTED_ERRORS} more",)
    return listed


def model_errors(
    instance: Any, model_cls: type[BaseModel]
) -> tuple[BaseModel | None, tuple[str, ...]]:
    """The model instance and no errors, or None and pydantic's errors as path: message."""
    try:
        return model_cls.model_validate(instance), ()
    except ValidationError as exc:
        errors = tuple(
            f"$.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            if err["loc"]
            else f"$: {err['msg']}"
            for err in exc.errors()[:MAX_LISTED_ERRORS]
        )
        return None, errors


def check_answer(
    result: ChatResult, validator: Draft202012Validator, model_cls: type[BaseModel] | None
) -> dict[str, Any] | BaseModel:
    """The answer's JSON object (or model instance); ``LLMOutputError`` naming every violation."""
    data, problem = parse_json(result.content)
    if problem is not None:
        cut = result.finish_reason == "length"
        raise LLMOutputError(
            problem + (" (the answer was cut off at max_tokens)" if cut else ""),
            hint="raise max_tokens for this stage" if cut else None,
            content=result.content or "",
            errors=(problem,),
            result=result,
        )
    errors = schema_errors(data, validator)
    if not errors and not isinstance(data, dict):
        errors = (f"$: expected a JSON object, got {type(data).__name__}",)
    if not errors and model_cls is not None:
        instance, errors = model_errors(data, model_cls)
        if instance is not None:
            return instance
    if errors:
        raise LLMOutputError(
            f"the model's answer breaks the schema: {errors[0]}",
            content=result.content or "",
            errors=errors,
            result=result,
        )
    assert isinstance(data, dict)
    return data
