"""Job arguments to and from JSON: never pickle, and every error names its culprit."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .exceptions import InvalidPayload

__all__ = ["decode", "encode"]

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(job_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """Return the JSON text for a call, or raise InvalidPayload naming the bad argument."""
    try:
        return _encoder.encode({"args": list(args), "kwargs": dict(kwargs)})
    except (TypeError, ValueError):
        pass
    # Find which argument is at fault so the message can name it.
    for index, value in enumerate(args):
        _check(job_name, f"positional argument {index}", value)
    for key, value in kwargs.items():
        _check(job_name, f"argument {key!r}", value)
    raise InvalidPayload(f"Arguments of job {job_name!r} cannot be stored as JSON.")


def _check(job_name: str, label: str, value: Any) -> None:
    try:
        _encoder.encode(value)
    except (TypeError, ValueError) as e:
        raise InvalidPayload(
            f"Job {job_name!r}: {label} ({type(value).__name__}: {value!r:.80}) cannot be "
            f"stored as JSON: {e}. Pass plain JSON values (str, int, float, bool, None, "
            f"lists, dicts with str keys), such as an id instead of a model instance."
        ) from e


def decode(text: str | bytes) -> tuple[list[Any], dict[str, Any]]:
    """Return (args, kwargs) from stored JSON, or raise InvalidPayload saying why not."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidPayload(f"The payload is not valid JSON: {e}: {text!r:.200}") from e
    if not isinstance(data, dict):
        raise InvalidPayload(
            f'The payload must be an object {{"args": [...], "kwargs": {{...}}}}, '
            f"got {type(data).__name__}: {text!r:.200}"
        )
    unknown = set(data) - {"args", "kwargs"}
    if unknown:
        raise InvalidPayload(
            f'The payload has unknown keys {sorted(unknown)}; only "args" and "kwargs" '
            f"are allowed."
        )
    args = data.get("args", [])
    kwargs = data.get("kwargs", {})
    if not isinstance(args, list):
        raise InvalidPayload(f'The payload\'s "args" must be a list, got {args!r:.100}')
    if not isinstance(kwargs, dict):
        raise InvalidPayload(f'The payload\'s "kwargs" must be an object, got {kwargs!r:.100}')
    return args, kwargs
