"""Encrypted job arguments (`@job(encrypt=True)` or `encrypt=["email", ...]`).

Sealed in the pushing process: the payload keeps the job's shape, with each encrypted
argument replaced by "[encrypted]", and the arguments themselves as one AES-256-GCM
ciphertext under "encrypted" ({"key": key id, "ct": base64}). Opened only where the
job runs (the worker, the inline mode, `capture_jobs`). Keys computed from them
(unique, concurrency, debounce) are stored as HMAC-SHA256 under
LATERITE_QUEUE_ENCRYPTION_HASH_KEY, and an error text of an encrypted job is
scrubbed of the arguments' plain forms before it is stored, logged or traced.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import payload
from .conf import settings
from .core.cipher import CipherUnavailable, Keyring, UndecryptableError, decoded_key, keyed_hash
from .exceptions import InvalidPayload, LateriteConfigurationError

if TYPE_CHECKING:
    from .core.values import NewJob
    from .jobs import JobFunction

__all__ = ["PLACEHOLDER", "REDACTED", "SEALED_MARK", "UndecryptableError", "hash_keys",
           "hashed", "key_ids", "keyring", "open_arguments", "open_link", "resealed", "scrub",
           "sealed_link", "sealed_payload", "secret_values"]

logger = logging.getLogger("laterite.encryption")

PLACEHOLDER = "[encrypted]"  # where an encrypted argument was, in the stored payload
REDACTED = "[redacted]"  # what replaces an argument's plain form in an error text
HASH_PREFIX = "hmac:"  # a key stored as a keyed hash: "hmac:" + HMAC-SHA256 hex

# The keyring made from the settings' list, kept while the settings' list is the same
# object (conf keeps a checked value until a setting changes).
_made: tuple[Any, Keyring] | None = None


def keyring(job_name: str | None = None) -> Keyring:
    """The keyring of LATERITE_QUEUE_ENCRYPTION_KEYS; raise LateriteConfigurationError
    if none is listed or `cryptography` is not installed (naming `job_name`)."""
    global _made
    entries = settings.ENCRYPTION_KEYS  # a malformed list raises here, saying why
    made = _made
    if made is not None and made[0] is entries:
        return made[1]
    who = f"Job {job_name!r} encrypts its arguments" if job_name else "Encrypted arguments"
    if not entries:
        raise LateriteConfigurationError(
            f"{who}, but LATERITE_QUEUE_ENCRYPTION_KEYS lists no key: add "
            f"[{{'id': ..., 'key': base64 of 32 bytes}}].")
    try:
        ring = Keyring(entries)
    except CipherUnavailable as e:
        raise LateriteConfigurationError(f"{who}: {e}") from e
    _made = (entries, ring)
    return ring


def hashed(job_name: str, key: str) -> str:
    """`key` (made of encrypted arguments) as stored: its keyed hash. Raise
    LateriteConfigurationError if LATERITE_QUEUE_ENCRYPTION_HASH_KEY is not set."""
    if key.startswith(HASH_PREFIX):
        return key  # hashed already (a job stored again from its row)
    secret = settings.ENCRYPTION_HASH_KEY
    if secret is None:
        raise LateriteConfigurationError(
            f"Job {job_name!r} encrypts its arguments and computes a key from them "
            f"(unique_key, concurrency_key or debounce_key): set "
            f"LATERITE_QUEUE_ENCRYPTION_HASH_KEY (base64 of 32 bytes), the key those are "
            f"stored under as HMAC-SHA256, so they are not stored in plain.")
    raw = decoded_key(secret)
    assert raw is not None  # conf's rule checked it
    return HASH_PREFIX + keyed_hash(raw, key)


def hash_keys(job: JobFunction, new: NewJob) -> None:
    """Store the keys of a new job of an encrypted job as keyed hashes: its unique (or
    debounce) key, and its concurrency key unless it is the job's name."""
    if new.unique_key is not None:
        new.unique_key = hashed(job.name, new.unique_key)
    if new.concurrency_key is not None and new.concurrency_key != job.name:
        new.concurrency_key = hashed(job.name, new.concurrency_key)


def _sealed(job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
            ) -> tuple[Sequence[Any], Mapping[str, Any], dict[str, str] | None]:
    """(args, kwargs, sealed) of a call of an encrypted job: its encrypted arguments
    replaced by PLACEHOLDER, and they themselves sealed under the first key (None, and
    the call as given, when it passes none of them: their defaults). Raise
    InvalidPayload naming an argument that is not JSON."""
    positions = job.encrypted_positions
    if positions is None:  # encrypt=True: every argument
        if not args and not kwargs:
            return args, kwargs, None
        secret_args: list[list[Any]] = [[i, v] for i, v in enumerate(args)]
        hidden = kwargs
        shown: list[Any] = [PLACEHOLDER] * len(args)
    else:
        secret_args, hidden_names = [], []
        for name, index in positions.items():
            if index is not None and index < len(args):
                secret_args.append([index, args[index]])
            elif name in kwargs:
                hidden_names.append(name)
        if not secret_args and not hidden_names:
            return args, kwargs, None
        hidden = {name: kwargs[name] for name in hidden_names}
        shown = list(args)
        for index, _ in secret_args:
            shown[index] = PLACEHOLDER
    shown_kwargs = dict.fromkeys(kwargs, PLACEHOLDER) if hidden is kwargs else {
        **kwargs, **dict.fromkeys(hidden, PLACEHOLDER)}
    try:
        secret = payload._text({"args": secret_args, "kwargs": hidden})
        plain = secret.encode()
    except (TypeError, ValueError, RecursionError):
        payload.encode(job.name, args, kwargs)  # raises InvalidPayload naming the argument
        raise
    if secret.count("{") > 2 or not all(isinstance(key, str) for key in hidden):
        payload.check_keys(f"Job {job.name!r}", args, kwargs)
    return shown, shown_kwargs, keyring(job.name).seal(plain)


def sealed_payload(job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any],
                   trace: Mapping[str, str] | None) -> str:
    """The payload text of a call of an encrypted job: its encrypted arguments replaced
    by PLACEHOLDER, and sealed under the first key (or raise InvalidPayload naming the
    argument that is not JSON).

    For encrypt=True (every argument) the arguments are encoded as JSON once: the
    sealed part is written as text, and the placeholders' part, the same for every
    call of one shape (how many positional arguments, which keyword ones), is
    remembered. The text is the one the general path writes.
    """
    if job.encrypted_positions is not None or not (args or kwargs):
        shown, shown_kwargs, sealed = _sealed(job, args, kwargs)
        if sealed is None:
            return payload.encode(job.name, args, kwargs, trace)  # none given: defaults
        return payload.encode(job.name, shown, shown_kwargs, trace, sealed)
    try:
        secret = payload._text({"args": list(enumerate(args)), "kwargs": kwargs})
        plain = secret.encode()  # a lone surrogate: UnicodeEncodeError, a ValueError
    except (TypeError, ValueError, RecursionError):
        payload.encode(job.name, args, kwargs)  # raises InvalidPayload naming the argument
        raise
    if secret.count("{") > 2 or (kwargs and not all(isinstance(key, str) for key in kwargs)):
        payload.check_keys(f"Job {job.name!r}", args, kwargs)
    shape = (len(args), tuple(kwargs))
    head = _shown_heads.get(shape)
    if head is None:
        head = payload._text({"args": [PLACEHOLDER] * len(args),
                              "kwargs": dict.fromkeys(kwargs, PLACEHOLDER)})[:-1]
        if len(_shown_heads) < _SHOWN_HEADS_MAX:
            _shown_heads[shape] = head
    made = _made
    ring = made[1] if made is not None and made[0] is settings.ENCRYPTION_KEYS else keyring(
        job.name)
    text = f'{head},"{payload.SEALED_KEY}":{ring.seal_text(plain)}'
    if trace:
        return f'{text},"trace":{payload._encoder.encode(dict(trace))}}}'
    return text + "}"


# The start of the payload of a call of an encrypt=True job, by its shape: every
# argument a PLACEHOLDER (see sealed_payload).
_shown_heads: dict[tuple[int, tuple[str, ...]], str] = {}
_SHOWN_HEADS_MAX = 1024


def sealed_link(job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
                ) -> dict[str, Any]:
    """A call of an encrypted job as a chain link or batch callback (calls.JobCall.link):
    {"job", "args", "kwargs"} with its encrypted arguments replaced by PLACEHOLDER, and
    them sealed under "encrypted", as in a payload."""
    shown, shown_kwargs, sealed = _sealed(job, args, kwargs)
    link: dict[str, Any] = {"job": job.name, "args": list(shown), "kwargs": dict(shown_kwargs)}
    if sealed is not None:
        link[payload.SEALED_KEY] = sealed
    return link


def _opened(args: list[Any], kwargs: dict[str, Any], sealed: Any
            ) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """(args, kwargs, the encrypted ones' values) with `sealed` opened into them."""
    if sealed is None:
        return args, kwargs, []
    if not isinstance(sealed, dict):
        raise InvalidPayload(f'The payload\'s "{payload.SEALED_KEY}" must be an object.')
    plain = keyring().open(sealed)
    try:
        data = json.loads(plain)
        pairs, hidden = data["args"], data["kwargs"]
        secrets: list[Any] = []
        for index, value in pairs:
            args[index] = value
            secrets.append(value)
        for name, value in hidden.items():
            kwargs[name] = value
            secrets.append(value)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise InvalidPayload(f"The encrypted arguments are malformed once decrypted "
                             f"({type(e).__name__}).") from None
    return args, kwargs, secrets


def open_arguments(text: str | bytes) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """(args, kwargs, the encrypted ones' values) of a stored payload, its encrypted
    arguments decrypted; for a plain payload the third is empty.

    Raise InvalidPayload if it does not decode, UndecryptableError if no listed key
    opens it, LateriteConfigurationError if no key is listed here.
    """
    args, kwargs, sealed = payload.decode_sealed(text)
    if sealed is None:  # a plain payload, as most are: no further call per job
        return args, kwargs, []
    return _opened(args, kwargs, sealed)


def open_link(link: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) of a stored link (see sealed_link), its encrypted arguments
    decrypted. Raise as open_arguments does; ValueError for a malformed link."""
    args, kwargs = link.get("args", []), link.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ValueError(f"a malformed link: {link!r:.200}")
    args, kwargs, _ = _opened(list(args), dict(kwargs), link.get(payload.SEALED_KEY))
    return args, kwargs


def resealed(text: str) -> str | None:
    """The payload or link `text` with its encrypted arguments, and those of the chain
    links it carries, sealed again under the first key; None if it has none or all are
    under that key already (queue_rekey).

    Raise UndecryptableError if no listed key opens one of them.
    """
    if SEALED_MARK not in text:
        return None
    data = json.loads(text)
    ring = keyring()
    changed = False
    chain = data.get("chain") if isinstance(data, dict) else None
    for part in [data, *(chain if isinstance(chain, list) else [])]:
        sealed = part.get(payload.SEALED_KEY) if isinstance(part, dict) else None
        if isinstance(sealed, dict) and sealed.get("key") != ring.current_id:
            part[payload.SEALED_KEY] = ring.seal(ring.open(sealed))
            changed = True
    return payload._encoder.encode(data) if changed else None


# How a sealed part starts in every stored text (payload._text writes it so): the key
# id of each found without parsing the text.
SEALED_MARK = f'"{payload.SEALED_KEY}":{{"key":'
_KEY_ID = re.compile(re.escape(SEALED_MARK) + r'("(?:[^"\\]|\\.)*")')


def key_ids(text: str) -> set[str]:
    """The key ids the encrypted arguments in `text` (a payload, with its chain's links,
    or a link) are sealed under; empty for a text with none."""
    if SEALED_MARK not in text:
        return set()
    found = set()
    for quoted in _KEY_ID.findall(text):
        try:
            found.add(str(json.loads(quoted)))
        except ValueError:  # pragma: no cover - the pattern takes a JSON string
            continue
    return found


def secret_values(text: str | bytes) -> list[Any]:
    """The plain values of a payload's encrypted arguments ([] if it has none or they
    cannot be opened here): what `scrub` takes out of a text about the job."""
    try:
        return open_arguments(text)[2]
    except Exception:
        return []


def _words(values: Iterable[Any]) -> set[str]:
    """The forms an argument's value may take in a message: str and repr of it and of
    everything inside it, and a string's JSON form; each of 4 characters or more."""
    found: set[str] = set()
    stack = list(values)
    while stack:
        value = stack.pop()
        if value is None or isinstance(value, bool):
            continue  # "True" and "None" are everywhere in a traceback, and say nothing
        found.update((str(value), repr(value)))
        if isinstance(value, str):
            found.add(json.dumps(value))
        elif isinstance(value, dict):
            stack.extend(value)
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return {word for word in found if len(word) >= 4}


def scrub(text: str, secrets: Sequence[Any]) -> str:
    """`text` with each form of the `secrets` (see _words) replaced by REDACTED,
    longest first.

    It catches an argument quoted as it was given; not one transformed first (cut,
    upper-cased, hashed) or shorter than 4 characters.
    """
    if not secrets or not text:
        return text
    for word in sorted(_words(secrets), key=len, reverse=True):
        if word in text:
            text = text.replace(word, REDACTED)
    return text
