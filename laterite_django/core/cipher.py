"""Job arguments encrypted at rest: AES-256-GCM under named keys, and keyed hashes.

AES-256-GCM is authenticated (a changed byte fails the tag, so there is no padding
oracle to probe), and the key id is bound as associated data: a ciphertext relabelled
with another key's id does not open. Fernet would be AES-128-CBC with HMAC and has no
place for a key id. Each encryption draws a fresh 96-bit nonce from os.urandom, stored
in front of the ciphertext.

`cryptography` is an optional dependency (the `crypto` extra): it is imported only
when a Keyring is made.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["KEY_BYTES", "CipherUnavailable", "Keyring", "UndecryptableError", "decoded_key",
           "hash_key_problem", "keyed_hash", "keys_problem"]

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's 96-bit nonce


class CipherUnavailable(RuntimeError):
    """The `cryptography` package is not installed."""


class UndecryptableError(ValueError):
    """A ciphertext that no listed key opens: its key id is unknown, or it was altered."""

    def __init__(self, message: str, key_id: str) -> None:
        super().__init__(message)
        self.key_id = key_id


def decoded_key(text: Any) -> bytes | None:
    """The bytes of a base64 key, or None if `text` is not base64 text."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None


def keys_problem(value: Any) -> tuple[str, bool] | None:
    """What is wrong with LATERITE_QUEUE_ENCRYPTION_KEYS, or None.

    Returns (what, duplicate): `duplicate` is True when the only fault is a key id
    listed twice. No key's value is ever quoted.
    """
    if not isinstance(value, list | tuple):
        return f"it must be a list of {{'id': str, 'key': base64 of {KEY_BYTES} bytes}}", False
    seen: set[str] = set()
    for index, entry in enumerate(value):
        if not isinstance(entry, Mapping) or set(entry) != {"id", "key"}:
            return (f"entry {index} must be a dict with exactly the keys 'id' and 'key'",
                    False)
        key_id = entry["id"]
        if not isinstance(key_id, str) or not key_id or len(key_id) > 64:
            return f"entry {index}'s id must be a non-empty str of at most 64 characters", False
        key = decoded_key(entry["key"])
        if key is None:
            return f"key {key_id!r} is not base64 text", False
        if len(key) != KEY_BYTES:
            return (f"key {key_id!r} is {len(key)} bytes after base64 decoding, not "
                    f"{KEY_BYTES}", False)
        if key_id in seen:
            return f"key id {key_id!r} is listed twice", True
        seen.add(key_id)
    return None


def hash_key_problem(value: Any) -> str | None:
    """What is wrong with LATERITE_QUEUE_ENCRYPTION_HASH_KEY, or None (None is allowed)."""
    if value is None:
        return None
    key = decoded_key(value)
    if key is None:
        return "it must be None or base64 text"
    if len(key) < KEY_BYTES:
        return f"it is {len(key)} bytes after base64 decoding, fewer than {KEY_BYTES}"
    return None


def keyed_hash(key: bytes, text: str) -> str:
    """HMAC-SHA256 of `text` under `key`, as hex: what a key made of encrypted
    arguments is stored as."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


class Keyring:
    """The listed keys: the first encrypts, every one decrypts.

    `entries`: [{"id": ..., "key": base64}, ...], already checked (keys_problem).
    Raise CipherUnavailable if `cryptography` is not installed.
    """

    def __init__(self, entries: Sequence[Mapping[str, str]]) -> None:
        try:
            # An optional dependency (the `crypto` extra): imported only when used.
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as e:
            raise CipherUnavailable(
                "Encrypted job arguments need the cryptography package (the 'crypto' "
                "extra).") from e
        if not entries:
            raise ValueError("A keyring needs at least one key.")
        self._ciphers: dict[str, Any] = {}
        for entry in entries:
            key = decoded_key(entry["key"])
            if key is None or len(key) != KEY_BYTES:
                raise ValueError(f"Key {entry['id']!r} is not base64 of {KEY_BYTES} bytes.")
            self._ciphers.setdefault(entry["id"], AESGCM(key))
        self.current_id: str = entries[0]["id"]
        self._current = self._ciphers[self.current_id]
        self._current_ad = self.current_id.encode()
        # What seal_text writes before the ciphertext: the key id as a JSON string.
        self._text_head = '{"key":' + json.dumps(self.current_id, ensure_ascii=False) + ',"ct":"'

    @property
    def ids(self) -> list[str]:
        """The key ids, the encrypting one first."""
        return list(self._ciphers)

    def seal(self, plaintext: bytes) -> dict[str, str]:
        """Encrypt under the first key: {"key": its id, "ct": base64 of nonce + ciphertext}."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._current.encrypt(nonce, plaintext, self._current_ad)
        return {"key": self.current_id, "ct": base64.b64encode(nonce + sealed).decode("ascii")}

    def seal_text(self, plaintext: bytes) -> str:
        """`seal` written as JSON text, `{"key":...,"ct":"..."}`, as a payload stores it
        (the push's own path: no dict made and encoded again)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._current.encrypt(nonce, plaintext, self._current_ad)
        text = binascii.b2a_base64(nonce + sealed, newline=False).decode("ascii")
        return f'{self._text_head}{text}"}}'

    def open(self, sealed: Mapping[str, Any]) -> bytes:
        """Decrypt what `seal` made; raise UndecryptableError naming the key id if no
        listed key has its id, or it does not authenticate."""
        key_id = sealed.get("key") if isinstance(sealed, Mapping) else None
        if not isinstance(key_id, str):
            raise UndecryptableError("its ciphertext names no key id", str(key_id))
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UndecryptableError(
                f"it is encrypted under key id {key_id!r}, which "
                f"LATERITE_QUEUE_ENCRYPTION_KEYS does not list (listed: {self.ids})", key_id)
        raw = decoded_key(sealed.get("ct"))
        if raw is None or len(raw) <= NONCE_BYTES:
            raise UndecryptableError(f"its ciphertext under key id {key_id!r} is not base64 "
                                     f"of a nonce and a ciphertext", key_id)
        try:
            # An optional dependency (the `crypto` extra), present once a Keyring exists.
            from cryptography.exceptions import InvalidTag
        except ImportError as e:  # pragma: no cover - imported in __init__ already
            raise CipherUnavailable(str(e)) from e
        try:
            return bytes(cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], key_id.encode()))
        except InvalidTag:
            raise UndecryptableError(
                f"its ciphertext does not authenticate under key id {key_id!r} (altered, or "
                f"that id now names another key)", key_id) from None
