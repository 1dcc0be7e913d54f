"""`queue_work` waiting for a store that is down at start: a stop signal that comes
just as the store answers ends the command, as one that comes while it waits does
(the worker's own handlers are not in place yet: a lost signal left it running)."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest

from laterite_django.exceptions import StoreUnavailable
from laterite_django.management import store_check
from laterite_django.stores import get_store

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stop_signal_as_the_store_answers_is_not_lost(store, monkeypatch):
    assert threading.current_thread() is threading.main_thread()
    real = store_check.check_store
    looks = []

    def check(store) -> None:
        looks.append(1)
        if len(looks) == 1:
            raise StoreUnavailable("down for the first look")
        real(store)  # the real store answers; then the signal comes, before the return
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(store_check, "check_store", check)
    before = signal.getsignal(signal.SIGTERM)
    assert store_check.wait_for_store(get_store()) is False
    assert len(looks) == 2 and signal.getsignal(signal.SIGTERM) is before


def test_a_store_that_comes_back_is_waited_for(store, monkeypatch):
    real = store_check.check_store
    looks = []

    def check(store) -> None:
        looks.append(1)
        if len(looks) < 3:
            raise StoreUnavailable("down for two looks")
        real(store)

    monkeypatch.setattr(store_check, "check_store", check)
    assert store_check.wait_for_store(get_store()) is True
    assert len(looks) == 3


def test_a_stop_signal_sent_once_the_wait_is_logged_ends_it(store, monkeypatch):
    """The "waiting for it to come back" line is what an operator (or a test) sees
    before sending SIGTERM: the command's handler must be in place by then, not
    just before its first wait (a SIGTERM in between killed it, exit -15)."""
    real = store_check.check_store
    looks = []

    def check(store) -> None:
        looks.append(1)
        if len(looks) == 1:
            raise StoreUnavailable("down for the first look")
        real(store)

    class SignalOnWaiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for it to come back" in record.getMessage():
                os.kill(os.getpid(), signal.SIGTERM)

    missed = []
    previous = signal.signal(signal.SIGTERM, lambda *_: missed.append(1))
    handler = SignalOnWaiting()
    store_check.logger.addHandler(handler)
    monkeypatch.setattr(store_check, "check_store", check)
    try:
        assert store_check.wait_for_store(get_store()) is False
    finally:
        store_check.logger.removeHandler(handler)
        signal.signal(signal.SIGTERM, previous)
    assert missed == [] and len(looks) == 1
