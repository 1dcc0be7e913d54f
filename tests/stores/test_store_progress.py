"""Store.save_progress and Store.running: a running job's progress, on every store."""

from __future__ import annotations

from django.utils import timezone

from laterite_django.core.progress import Progress
from tests.testapp import jobs


def test_progress_is_saved_on_a_held_claim_and_read_with_it(store):
    assert store.running() == []
    jobs.record.push("a")
    jobs.mail.push("b")
    [claim] = store.claim(["default"], "w1")
    [other] = store.claim(["mail"], "w2")
    said = Progress(3, 10, "resizing", timezone.now())
    assert store.save_progress([(claim, said.to_text(claim.token))]) == 1

    first, second = store.running()
    assert (first.id, first.name, first.queue, first.attempts, first.claimed_by) == (
        claim.id, "tests.record", "default", 1, "w1")
    assert first.progress == said
    assert first.progress.describe() == "3/10 (30%) resizing"
    assert second.id == other.id and second.progress is None
    assert [r.id for r in store.running(limit=1)] == [claim.id]


def test_an_earlier_attempts_progress_is_not_shown(store):
    jobs.record.push("a")
    [claim] = store.claim(["default"], "w")
    store.save_progress([(claim, Progress(1, None, "", timezone.now()).to_text(claim.token))])
    store.release(claim, timezone.now(), "again")
    [again] = store.claim(["default"], "w")
    assert again.id == claim.id
    [running] = store.running()
    assert running.progress is None  # said under the first claim
    # A lost claim writes nothing.
    assert store.save_progress([(claim, Progress(2).to_text(claim.token))]) == 0
    assert store.running()[0].progress is None
