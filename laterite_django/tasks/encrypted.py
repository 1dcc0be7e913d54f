"""Tasks whose arguments are stored encrypted: `@task(encrypt=True)` or
`encrypt=["email", ...]` (see docs/howto/encryption.md).

Such a task is pushed as a call of the `laterite.task.encrypted` job, whose `args` and
`kwargs` (the task's arguments, all of them) are sealed as an encrypted job's are, so
only the worker that runs it opens them. Its result record keeps the arguments with
the encrypted ones replaced by "[encrypted]", its unique key as a keyed hash, its
errors' tracebacks scrubbed of the arguments, and its return value sealed: a value
is often made from the arguments (the account found for an e-mail address, a
token), and it rests in the results table for RESULT_TTL after the job is gone. The
value is opened when the result is read (get_result, refresh), in a process that
lists the key.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import encryption, payload
from ..jobs import encrypted_positions
from .compat import InvalidTask, Task

__all__ = ["ScrubbedError", "opened_value", "positions", "scrubbed", "sealed_value",
           "secrets_of", "shown_arguments", "validate_encrypt"]


class ScrubbedError(Exception):
    """What an encrypted task raised, as "Type: message" scrubbed of its arguments:
    logged (Django's task_finished handler) in its place."""


def _signature(task: Task) -> inspect.Signature:
    signature = inspect.signature(task.func)
    params = list(signature.parameters.values())
    if getattr(task, "takes_context", False) and params:
        params = params[1:]  # the TaskContext, passed by the runner
    return signature.replace(parameters=params)


def positions(task: Task) -> dict[str, int | None] | None:
    """encrypt=[names]: each name's position (None: keyword-only); None for True."""
    return encrypted_positions(_signature(task), getattr(task, "encrypt", False),
                               task.module_path)


def validate_encrypt(task: Task) -> None:
    """Refuse a bad `encrypt` (not True, False or a list of the task's parameter names)."""
    try:
        positions(task)
    except TypeError as e:
        raise InvalidTask(str(e).replace("Job ", "Task ", 1)) from None


def shown_arguments(task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]
                    ) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as the result record keeps them: each encrypted one replaced by
    encryption.PLACEHOLDER."""
    where = positions(task)
    if where is None:
        return ([encryption.PLACEHOLDER] * len(args),
                dict.fromkeys(kwargs, encryption.PLACEHOLDER))
    shown, shown_kwargs = list(args), dict(kwargs)
    for name, index in where.items():
        if index is not None and index < len(shown):
            shown[index] = encryption.PLACEHOLDER
        elif name in shown_kwargs:
            shown_kwargs[name] = encryption.PLACEHOLDER
    return shown, shown_kwargs


def secrets_of(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The values an error text of this call is scrubbed of ([] for a plain task)."""
    return [list(args), dict(kwargs)] if getattr(task, "encrypt", False) else []


def scrubbed(error: BaseException, secrets: Sequence[Any]) -> BaseException:
    """`error` itself for a plain task; for an encrypted one, a ScrubbedError saying
    its type and message with the arguments' plain forms taken out."""
    if not secrets:
        return error
    kind = type(error)
    said = encryption.scrub(f"{kind.__module__}.{kind.__qualname__}: {error}", secrets)
    return ScrubbedError(said.removeprefix("builtins."))


def sealed_value(value: Any) -> dict[str, Any]:
    """A return value as the record keeps it: {"encrypted": {"key", "ct"}}."""
    text = payload._encoder.encode(value)
    return {payload.SEALED_KEY: encryption.keyring().seal(text.encode())}


def opened_value(task: Any, value: Any) -> Any:
    """A stored return value as the task returned it: opened if the task encrypts and
    the value is sealed. Raise UndecryptableError naming the key id if no listed key
    opens it."""
    if (getattr(task, "encrypt", False) and isinstance(value, dict) and len(value) == 1
            and isinstance(value.get(payload.SEALED_KEY), dict)):
        return json.loads(encryption.keyring().open(value[payload.SEALED_KEY]))
    return value
