"""Encrypted arguments: the cipher, the payload, the keyed hashes, the checks, the
scrubbed error texts and the worker's refusal of a job it cannot decrypt."""

from __future__ import annotations

import base64
import json
import logging
import os

import pytest
from django.test import override_settings

from laterite_django import encryption, job, payload
from laterite_django.checks import check_encryption, check_settings
from laterite_django.core.cipher import Keyring, UndecryptableError, keys_problem
from laterite_django.exceptions import InvalidPayload, LateriteConfigurationError
from laterite_django.models import FailedJob
from laterite_django.testing import capture_jobs, run_jobs
from tests.settings import TEST_KEY_A, TEST_KEY_B
from tests.testapp.encrypted_jobs import broken, every, named
from tests.testapp.models import Record

EMAIL = "ann.secret@example.com"
TOKEN = "tok-7f3a9c1e"


def new_key(key_id: str) -> dict[str, str]:
    return {"id": key_id, "key": base64.b64encode(os.urandom(32)).decode()}


# -- the cipher -----------------------------------------------------------------


def test_a_round_trip_under_the_first_key_and_open_under_any():
    old = Keyring([TEST_KEY_A])
    sealed = old.seal(b"hello")
    assert sealed["key"] == "test-a" and b"hello" not in base64.b64decode(sealed["ct"])
    assert old.open(sealed) == b"hello"
    both = Keyring([TEST_KEY_B, TEST_KEY_A])
    assert both.open(sealed) == b"hello"  # an older key still decrypts
    assert both.seal(b"x")["key"] == "test-b"  # the first encrypts
    assert old.seal(b"hello") != old.seal(b"hello")  # a fresh nonce each time


def test_an_unknown_key_id_is_named():
    sealed = Keyring([TEST_KEY_A]).seal(b"hello")
    with pytest.raises(UndecryptableError, match=r"'test-a'.*does not list") as raised:
        Keyring([TEST_KEY_B]).open(sealed)
    assert raised.value.key_id == "test-a"


def test_a_tampered_ciphertext_or_relabelled_key_id_does_not_open():
    ring = Keyring([TEST_KEY_A, TEST_KEY_B])
    sealed = ring.seal(b"hello")
    raw = bytearray(base64.b64decode(sealed["ct"]))
    raw[-1] ^= 1
    with pytest.raises(UndecryptableError, match="does not authenticate"):
        ring.open({"key": "test-a", "ct": base64.b64encode(bytes(raw)).decode()})
    # The key id is bound as associated data: the same bytes under another id fail.
    same_key_other_id = Keyring([TEST_KEY_A, {"id": "alias", "key": TEST_KEY_A["key"]}])
    with pytest.raises(UndecryptableError, match="'alias'"):
        same_key_other_id.open({"key": "alias", "ct": sealed["ct"]})


@pytest.mark.parametrize(("value", "said", "duplicate"), [
    ("key", "must be a list", False),
    ([{"id": "a"}], "exactly the keys 'id' and 'key'", False),
    ([{"id": "", "key": TEST_KEY_A["key"]}], "non-empty str", False),
    ([{"id": "short", "key": base64.b64encode(b"x" * 16).decode()}],
     "key 'short' is 16 bytes after base64 decoding, not 32", False),
    ([{"id": "nb", "key": "not base64!"}], "key 'nb' is not base64", False),
    ([TEST_KEY_A, {"id": "test-a", "key": TEST_KEY_B["key"]}], "'test-a' is listed twice",
     True),
])
def test_bad_keys_are_named(value, said, duplicate):
    what, twice = keys_problem(value)
    assert said in what and twice is duplicate


# -- the payload ----------------------------------------------------------------


def test_every_argument_is_stored_encrypted_and_opened_as_given():
    [new] = every.new_jobs([((7, EMAIL), {"token": TOKEN})])
    stored = json.loads(new.payload)
    assert stored["args"] == [encryption.PLACEHOLDER] * 2
    assert stored["kwargs"] == {"token": encryption.PLACEHOLDER}
    assert stored["encrypted"]["key"] == "test-a"
    assert EMAIL not in new.payload and TOKEN not in new.payload
    assert encryption.open_arguments(new.payload) == ([7, EMAIL], {"token": TOKEN},
                                                      [7, EMAIL, TOKEN])


@pytest.mark.parametrize("call", [((7, EMAIL), {}), ((7,), {"email": EMAIL, "token": TOKEN}),
                                  ((), {"user_id": 7, "email": EMAIL})])
def test_the_payload_of_every_argument_is_the_general_paths_text(call):
    """encrypt=True writes its payload in one pass (the arguments encoded once, the
    placeholders' part remembered by shape): the text payload.encode writes."""
    args, kwargs = call
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    for given in (None, trace):
        text = encryption.sealed_payload(every, args, kwargs, given)
        sealed = json.loads(text)["encrypted"]
        shown = [encryption.PLACEHOLDER] * len(args)
        shown_kwargs = dict.fromkeys(kwargs, encryption.PLACEHOLDER)
        assert text == payload.encode(every.name, shown, shown_kwargs, given, sealed)
        assert encryption.open_arguments(text)[:2] == (list(args), kwargs)
    with pytest.raises(InvalidPayload, match="argument 'token'"):
        encryption.sealed_payload(every, (1, EMAIL), {"token": object()}, None)
    with pytest.raises(InvalidPayload, match="holds a dict with key 1"):
        encryption.sealed_payload(every, (1, {1: "a"}), {}, None)


def test_named_arguments_alone_are_encrypted_by_position_or_keyword():
    for call in (((1, EMAIL), {}), ((1,), {"email": EMAIL})):
        [new] = named.new_jobs([call])
        stored = json.loads(new.payload)
        assert stored["args"][0] == 1 and EMAIL not in new.payload
        args, kwargs, secrets = encryption.open_arguments(new.payload)
        assert (args, kwargs) == (list(call[0]), call[1]) and secrets == [EMAIL]


def test_an_argument_that_is_not_json_is_named():
    with pytest.raises(InvalidPayload, match="argument 'email'"):
        named.new_jobs([((1,), {"email": {1, 2}})])


def test_a_name_that_is_no_parameter_is_refused_at_definition(scratch_jobs):
    with pytest.raises(TypeError, match=r"encrypt names 'mail'.*its parameters: user_id, email"):
        job("tests.enc.bad", encrypt=["mail"])(lambda user_id, email: None)
    with pytest.raises(TypeError, match="non-empty list"):
        job("tests.enc.bad2", encrypt="email")(lambda email: None)


def test_keys_computed_from_encrypted_arguments_are_keyed_hashes(scratch_jobs):
    [first] = named.new_jobs([((1, EMAIL), {})])
    [again] = named.new_jobs([((2, EMAIL), {})])
    [other] = named.new_jobs([((1, "bob@example.com"), {})])
    assert first.unique_key.startswith("hmac:") and EMAIL not in first.unique_key
    assert first.unique_key == again.unique_key != other.unique_key  # still usable
    limited = job("tests.enc.limited", encrypt=["email"], concurrency=2,
                  concurrency_key=lambda email, note: f"per-{email}")(lambda email, note: None)
    scratch_jobs.append(limited.name)
    [limited_job] = limited.new_jobs([((), {"email": EMAIL, "note": "n"})])
    assert limited_job.concurrency_key.startswith("hmac:")
    assert EMAIL not in limited_job.concurrency_key
    # The hash key does not rotate with the encryption keys: same hash under [B, A].
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_B, TEST_KEY_A]):
        [rotated] = named.new_jobs([((1, EMAIL), {})])
    assert rotated.unique_key == first.unique_key


def test_a_push_is_refused_without_keys_or_hash_key():
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[]), pytest.raises(
            LateriteConfigurationError, match=r"'tests.enc.every' encrypts.*lists no key"):
        every.new_jobs([((1, EMAIL), {})])
    with override_settings(LATERITE_QUEUE_ENCRYPTION_HASH_KEY=None), pytest.raises(
            LateriteConfigurationError, match="set LATERITE_QUEUE_ENCRYPTION_HASH_KEY"):
        named.new_jobs([((1, EMAIL), {})])
    bad = [{"id": "short", "key": base64.b64encode(b"x" * 16).decode()}]
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=bad), pytest.raises(
            LateriteConfigurationError, match="'short' is 16 bytes") as raised:
        every.new_jobs([((1, EMAIL), {})])
    assert bad[0]["key"] not in str(raised.value)  # a key is never quoted


def test_capture_and_inline_see_the_arguments_as_given(settings):
    with capture_jobs() as pushed:
        every.push(3, EMAIL, token=TOKEN)
    assert pushed[0].args == (3, EMAIL) and pushed[0].kwargs == {"token": TOKEN}


# -- the checks -----------------------------------------------------------------


def test_checks_of_the_keys_name_the_key_and_never_show_it():
    short = {"id": "short", "key": base64.b64encode(b"x" * 16).decode()}
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[short]):
        [error] = check_settings()
    assert error.id == "laterite.E043" and "'short' is 16 bytes" in error.msg
    assert short["key"] not in error.msg
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_A, TEST_KEY_A]):
        assert [m.id for m in check_settings()] == ["laterite.E044"]
    with override_settings(LATERITE_QUEUE_ENCRYPTION_HASH_KEY="c2hvcnQ="):
        assert [m.id for m in check_settings()] == ["laterite.E045"]


def test_checks_of_jobs_that_encrypt(monkeypatch):
    assert check_encryption() == []
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[],
                           LATERITE_QUEUE_ENCRYPTION_HASH_KEY=None):
        found = {m.id: m.msg for m in check_encryption()}
    assert set(found) == {"laterite.E046", "laterite.E048"}
    assert "'tests.enc.every'" in found["laterite.E046"]
    assert "'tests.enc.named'" in found["laterite.E048"]
    assert "'tests.enc.every'" not in found["laterite.E048"]  # it computes no key
    monkeypatch.setattr("importlib.util.find_spec",
                        lambda name, *a: None if name == "cryptography" else object())
    assert [m.id for m in check_encryption()] == ["laterite.E047"]


# -- running them ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_failure_is_scrubbed_of_the_arguments(store, caplog):
    caplog.set_level(logging.INFO, logger="laterite")
    broken.push(EMAIL, {"card": "4111111111111111", "n": 123456})
    every.push(5, EMAIL, token=TOKEN)
    run_jobs(raise_errors=False)
    [failed] = FailedJob.objects.all()
    assert "ValueError: cannot reach [redacted] ([redacted])" in failed.error
    for secret in (EMAIL, "4111111111111111", "123456"):
        assert secret not in failed.error and secret not in caplog.text
    assert Record.objects.get(kind="enc-every").value == f"5|{EMAIL}|{TOKEN}"


@pytest.mark.django_db(transaction=True)
def test_a_job_under_a_key_no_longer_listed_fails_naming_its_id_and_key(store):
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_B]):
        every.push(1, EMAIL)
    run_jobs(raise_errors=False)  # under [A] alone: B is unknown here
    [failed] = FailedJob.objects.all()
    assert f"job #{failed.job_id} cannot be decrypted" in failed.error
    assert "'test-b'" in failed.error
    assert not Record.objects.filter(kind="enc-every").exists()


def test_scrub_takes_out_reprs_strs_and_nested_values_not_short_ones():
    text = "bad 'ann@x.org' and ann@x.org, 12345, {'k': 'deep-value'}, abc, True"
    scrubbed = encryption.scrub(text, ["ann@x.org", 12345, {"k": "deep-value"}, "abc", True])
    assert "ann@x.org" not in scrubbed and "12345" not in scrubbed
    assert "deep-value" not in scrubbed
    assert "abc" in scrubbed and "True" in scrubbed  # too short, or says nothing
