"""@job(sequence=..., sequence_on_failure=...) and enqueue(sequence=...): the key goes first
in the payload (core/sequences.py), an encrypted job's as its keyed hash; bad options are
refused at definition, a sequence with a debounce or in a chain at the push."""

from __future__ import annotations

import pytest

from laterite_django import job
from laterite_django.core.sequences import SequenceMark, as_retry_of, sequence_of
from laterite_django.payload import decode
from tests.testapp import jobs


def test_the_key_is_the_first_item_of_the_payload_and_the_arguments_decode():
    [new] = jobs.seq_step.new_jobs([(("acct:7", 3), {"seconds": 0.5})])
    assert new.payload.startswith('{"seq":["acct:7",0],')
    assert sequence_of(new.payload) == SequenceMark("acct:7", False)
    assert decode(new.payload) == (["acct:7", 3], {"seconds": 0.5})
    [go_on] = jobs.seq_go_on.new_jobs([(("k", 1), {})])
    assert sequence_of(go_on.payload) == SequenceMark("k", True)
    retried = as_retry_of(new.payload, 41)
    assert sequence_of(retried) == SequenceMark("acct:7", False, 41)
    assert decode(retried) == decode(new.payload)
    assert sequence_of(jobs.record.new_jobs([(("x",), {})])[0].payload) is None


def test_a_key_with_quotes_and_non_ascii_text_comes_back_whole():
    key = 'a "quoted" \\ key: é'
    [new] = jobs.seq_step.new_jobs([((key, 1), {})])
    assert sequence_of(new.payload).key == key


def test_enqueue_takes_a_sequence_of_its_own(store):
    pushed = jobs.record.enqueue(("x",), {}, sequence="mine")
    (claim,) = store.claim(["default"], "w")
    assert claim.id == pushed.id and sequence_of(claim.payload).key == "mine"


def test_a_key_of_none_is_no_sequence(scratch_jobs):
    maybe = job("tests.seq.maybe", sequence=lambda key: key)(lambda key: None)
    scratch_jobs.append(maybe.name)
    [new] = maybe.new_jobs([((None,), {})])
    assert sequence_of(new.payload) is None


def test_bad_options_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"sequence_on_failure must be 'wait' or 'continue', "
                                         r"got 'stop'"):
        job("tests.seq.bad1", sequence=lambda a: a, sequence_on_failure="stop")(lambda a: None)
    with pytest.raises(TypeError, match="sequence must be callable"):
        job("tests.seq.bad2", sequence="acct")(lambda a: None)
    with pytest.raises(TypeError, match="a job of a sequence cannot be debounced"):
        job("tests.seq.bad3", sequence=lambda a: a, debounce=5,
            debounce_key=lambda a: a)(lambda a: None)
    with pytest.raises(TypeError, match="must be a str or None"):
        jobs.record.enqueue(("x",), {}, sequence=7)
    with pytest.raises(TypeError, match="a job of a sequence cannot be debounced"):
        jobs.seq_step.push("acct", 1, debounce=5, debounce_key="k")
    with pytest.raises(ValueError, match="runs in a sequence: it cannot be part of a chain"):
        jobs.seq_step.call("acct", 1)


def test_a_key_of_encrypted_arguments_is_stored_as_its_keyed_hash(scratch_jobs):
    secret = job("tests.seq.secret", encrypt=["email"],
                 sequence=lambda email: f"mail:{email}")(lambda email: None)
    scratch_jobs.append(secret.name)
    [new] = secret.new_jobs([(("ann@example.com",), {})])
    [again] = secret.new_jobs([(("ann@example.com",), {})])
    key = sequence_of(new.payload).key
    assert key.startswith("hmac:") and "ann@example.com" not in new.payload
    assert key == sequence_of(again.payload).key
