"""Job arguments to and from JSON: never pickle, and every error names its culprit."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .exceptions import InvalidPayload

__all__ = ["SEALED_KEY", "check_keys", "check_text", "decode", "decode_sealed", "encode",
           "schedule_of", "with_schedule"]

# The key of a payload's encrypted arguments (see `encryption`): {"key": id, "ct": ...}.
SEALED_KEY = "encrypted"

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# The C encoder `_encoder.encode` builds at each call, built once: a push's arguments
# encoded in one call. Without the check for circular references, which needs a
# fresh dict per call: a circular value recurses until RecursionError, and the checked
# path below names it.
_make = getattr(json.encoder, "c_make_encoder", None)
_chunks = None if _make is None else _make(
    None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False,
    False)


def _text(value: Any) -> str:
    if _chunks is None:  # pragma: no cover - Python without the _json module
        return _encoder.encode(value)
    return "".join(_chunks(value, 0))


def encode(
    job_name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
    trace: Mapping[str, str] | None = None, sealed: Mapping[str, str] | None = None,
) -> str:
    """Return the JSON text for a call, or raise InvalidPayload naming the bad argument.

    `trace`: the pusher's trace context (see `tracing`), kept under the key "trace".
    `sealed`: the call's encrypted arguments (see `encryption`), under "encrypted".
    """
    try:
        text = _text({"args": list(args), "kwargs": dict(kwargs)})
        # A lone surrogate passes the encoder (ensure_ascii=False) but is not UTF-8, which
        # every store writes: refused below. An ASCII text (most) is known so at no cost.
        if not text.isascii():
            text.encode()
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError: a ValueError
        pass
    else:
        # JSON turns keys 1 and None into "1" and "null": refuse them. The text's two
        # braces are its own; with no other, no argument holds a dict to look into.
        if text.count("{") > 2 or (kwargs and not all(isinstance(key, str) for key in kwargs)):
            check_keys(f"Job {job_name!r}", args, kwargs)
        if sealed:
            text = f'{text[:-1]},"{SEALED_KEY}":{_text(sealed)}}}'
        if trace:
            return f'{text[:-1]},"trace":{_encoder.encode(dict(trace))}}}'
        return text
    # Find which argument is at fault so the message can name it.
    for index, value in enumerate(args):
        _check(job_name, f"positional argument {index}", value)
    for key, value in kwargs.items():
        _check(job_name, f"argument {key!r}", value)
    raise InvalidPayload(f"Arguments of job {job_name!r} cannot be stored as JSON.")


def check_keys(owner: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise InvalidPayload if a dict in the arguments has a key that is not a str.

    `owner` starts the message ("Job 'x'", "Task 'y'"). JSON would store such a key
    as a string, so the function would get back {"1": ...} for {1: ...}.
    """
    for key in kwargs:
        if not isinstance(key, str):
            raise InvalidPayload(
                f"{owner}: argument name {key!r} ({type(key).__name__}) is not a string."
            )
    labelled = [(f"positional argument {i}", value) for i, value in enumerate(args)]
    labelled += [(f"argument {key!r}", value) for key, value in kwargs.items()]
    for label, value in labelled:
        key = _bad_key(value)
        if key is not _NONE:
            stored = next(iter(json.loads(_encoder.encode({key: 0}))))
            raise InvalidPayload(
                f"{owner}: {label} holds a dict with key {key!r} ({type(key).__name__}): JSON "
                f"object keys must be strings, and it would come back as {stored!r}. Use str "
                f"keys."
            )


def check_text(owner: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise InvalidPayload if a string in the arguments (a dict key included) holds a
    NUL or a lone surrogate, naming the argument.

    For arguments also kept in a JSON column (a task's result): PostgreSQL's jsonb
    has no NUL. Arguments that are not JSON at all are left to `encode` to name.
    """
    try:
        text = _text([list(args), dict(kwargs)])
        if "\\u0000" not in text and (text.isascii() or text.encode()):
            return
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError: a ValueError
        pass
    labelled = [(f"positional argument {i}", value) for i, value in enumerate(args)]
    labelled += [(f"argument {key!r}", value) for key, value in kwargs.items()]
    for label, value in labelled:
        found = _bad_string(value)
        if found:
            raise InvalidPayload(
                f"{owner}: {label} ({type(value).__name__}: {value!r:.80}) holds {found}, "
                f"which no store can keep."
            )


def _bad_string(value: Any) -> str | None:
    """Say what the first string in `value` holding a NUL or a lone surrogate holds."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\0" in item:
                return "a NUL character"
            try:
                item.encode()
            except UnicodeEncodeError as e:
                return f"a lone surrogate {item[e.start]!r}"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


_NONE = object()
_CONTAINERS = (dict, list, tuple)


def _bad_key(value: Any) -> Any:
    """Return the first dict key in `value` that is not a str, or _NONE."""
    if not isinstance(value, _CONTAINERS):
        return _NONE
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()  # only containers are pushed
        if isinstance(item, dict):
            for key in item:
                if type(key) is not str and not isinstance(key, str):
                    return key
            items: Any = item.values()
        else:
            items = item
        for inner in items:
            if isinstance(inner, _CONTAINERS):
                push(inner)
    return _NONE


def _check(job_name: str, label: str, value: Any) -> None:
    try:
        text = _encoder.encode(value)
    except RecursionError as e:
        # Not shown: its repr would recurse as deeply.
        raise InvalidPayload(
            f"Job {job_name!r}: {label} ({type(value).__name__}) is nested too deeply to be "
            f"stored as JSON (Python's recursion limit, {sys.getrecursionlimit()}). Pass a "
            f"flatter value."
        ) from e
    except (TypeError, ValueError) as e:
        raise InvalidPayload(
            f"Job {job_name!r}: {label} ({type(value).__name__}: {value!r:.80}) cannot be "
            f"stored as JSON: {e}. Pass plain JSON values (str, int, float, bool, None, "
            f"lists, dicts with str keys), such as an id instead of a model instance."
        ) from e
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise InvalidPayload(
            f"Job {job_name!r}: {label} ({type(value).__name__}: {value!r:.80}) holds a lone "
            f"surrogate {text[e.start]!r}, which is not UTF-8 and no store can keep. Decode "
            f"the text it came from properly (a surrogate pair is one character)."
        ) from e


def decode(text: str | bytes) -> tuple[list[Any], dict[str, Any]]:
    """Return (args, kwargs) from stored JSON, or raise InvalidPayload saying why not.

    Encrypted arguments are left as their placeholders: `encryption.open_arguments`
    puts them back where the job runs.
    """
    args, kwargs, _ = decode_sealed(text)
    return args, kwargs


def decode_sealed(text: str | bytes) -> tuple[list[Any], dict[str, Any], Any]:
    """(args, kwargs, its encrypted arguments or None) from stored JSON, or raise
    InvalidPayload saying why not."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidPayload(f"The payload is not valid JSON: {e}: {text!r:.200}") from e
    if not isinstance(data, dict):
        raise InvalidPayload(
            f'The payload must be an object {{"args": [...], "kwargs": {{...}}}}, '
            f"got {type(data).__name__}: {text!r:.200}"
        )
    unknown = set(data) - {"args", "kwargs", "schedule", "trace", "chain", "batch", "seq",
                           SEALED_KEY}
    if unknown:
        raise InvalidPayload(
            f'The payload has unknown keys {sorted(unknown)}; only "args" and "kwargs" '
            f'(and "schedule", "trace", "chain", "batch", "seq", "{SEALED_KEY}") are allowed.'
        )
    args = data.get("args", [])
    kwargs = data.get("kwargs", {})
    if not isinstance(args, list):
        raise InvalidPayload(f'The payload\'s "args" must be a list, got {args!r:.100}')
    if not isinstance(kwargs, dict):
        raise InvalidPayload(f'The payload\'s "kwargs" must be an object, got {kwargs!r:.100}')
    return args, kwargs, data.get(SEALED_KEY)


# A job pushed by a schedule carries the schedule's name and its tick in its payload,
# as "schedule": [name, tick in ISO 8601], beside its arguments (cx.schedule and
# cx.scheduled_at); no store keeps anything else for it.
_SCHEDULE_KEY = '"schedule":'


def with_schedule(text: str, name: str, tick: datetime) -> str:
    """The payload `text` marked as pushed by schedule `name` for `tick`."""
    data = json.loads(text)
    data["schedule"] = [name, tick.isoformat()]
    return _encoder.encode(data)


def schedule_of(text: str) -> tuple[str, datetime] | None:
    """The (schedule name, tick) a payload was pushed for, or None (most jobs: found
    without parsing the payload again)."""
    if _SCHEDULE_KEY not in text:
        return None
    try:
        found = json.loads(text).get("schedule")
        return str(found[0]), datetime.fromisoformat(found[1])
    except (TypeError, ValueError, IndexError, AttributeError):
        return None
