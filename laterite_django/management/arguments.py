"""argparse `type=` validators and helpers shared by the queue_* commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from django.core.management.base import CommandError

__all__ = [
    "at_most", "confirm", "failed_ids", "non_negative_float", "positive_float", "positive_int",
]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def positive_float(text: str) -> float:
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def non_negative_float(text: str) -> float:
    value = _seconds(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _seconds(text: str) -> float:
    """Read a number of seconds, any sign: the callers set the bound."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def at_most(limit: int) -> Callable[[str], str]:
    """A `type=` that takes a non-empty text of at most `limit` characters."""

    def text(value: str) -> str:
        if not value:
            raise argparse.ArgumentTypeError("it cannot be empty")
        if len(value) > limit:
            raise argparse.ArgumentTypeError(
                f"{value[:20]!r}... is {len(value)} characters long; at most {limit} fit"
            )
        return value

    return text


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f'{text!r} must be a JSON object like {{"args": [...], "kwargs": {{...}}}}'
        )
    return value


def failed_ids(options: dict) -> list[int] | None:
    """Return the FailedJob ids given, None for --all; refuse both or neither."""
    ids, every = options["ids"], options["all"]
    if ids and every:
        raise CommandError("Give failed job ids or --all, not both.")
    if not ids and not every:
        raise CommandError("Give one or more failed job ids (see queue_failed), or --all.")
    return None if every else ids


def confirm(command, question: str, options: dict) -> bool:
    """Ask `question` unless --no-input; refuse when there is nobody to answer."""
    if not options.get("interactive", True):
        return True
    if not sys.stdin.isatty():
        raise CommandError(
            "This deletes jobs and there is no terminal to confirm it: add --no-input."
        )
    answer = input(f"{question} Type 'yes' to go on: ")
    if answer.strip().lower() != "yes":
        command.stdout.write("Nothing changed.")
        return False
    return True
