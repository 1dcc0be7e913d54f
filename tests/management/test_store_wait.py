"""`queue_work` waiting for a store that is down at start: a stop signal that comes
just as the store answers ends the command, as one that comes while it waits does
(the worker's own handlers are not in place yet: a lost signal left it running)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from laterite_django.exceptions import StoreUnavailable
from laterite_django.management import store_check
from laterite_django.stores import get_store

pytestmark = pytest.mark.django_db(transaction=True)


def down_for(n: int, then: Callable[[], None] | None = None
             ) -> tuple[Callable[[Any], None], list[int]]:
    """A stand-in for check_store that finds the store down at its first `n` looks,
    then asks the real store (and calls `then`); and the list of its looks."""
    real = store_check.check_store
    looks: list[int] = []

    def check(store) -> None:
        looks.append(1)
        if len(looks) <= n:
            raise StoreUnavailable(f"down for {n} look(s)")
        real(store)
        if then is not None:
            then()

    return check, looks


def test_a_stop_signal_as_the_store_answers_is_not_lost(store, monkeypatch):
    assert threading.current_thread() is threading.main_thread()
    # The real store answers; then the signal comes, before the return.
    check, looks = down_for(1, then=lambda: os.kill(os.getpid(), signal.SIGTERM))
    monkeypatch.setattr(store_check, "check_store", check)
    before = signal.getsignal(signal.SIGTERM)
    assert store_check.wait_for_store(get_store()) is False
    assert len(looks) == 2 and signal.getsignal(signal.SIGTERM) is before


def test_a_store_that_comes_back_is_waited_for(store, monkeypatch):
    check, looks = down_for(2)
    monkeypatch.setattr(store_check, "check_store", check)
    assert store_check.wait_for_store(get_store()) is True
    assert len(looks) == 3


def test_a_stop_signal_sent_once_the_wait_is_logged_ends_it(store, monkeypatch):
    """The "waiting for it to come back" line is what an operator (or a test) sees
    before sending SIGTERM: the command's handler must be in place by then, not
    just before its first wait (a SIGTERM in between killed it, exit -15)."""

    class SignalOnWaiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for it to come back" in record.getMessage():
                os.kill(os.getpid(), signal.SIGTERM)

    check, looks = down_for(1)
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
