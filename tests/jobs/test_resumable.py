"""`cx.iterate`, `cx.step` and the checkpoint, called directly: keyset pages over a real
table, a fetch function, hand-over and lost claims, bad input named. The worker's use of
them (saved under a claim, stop signals, crashes) is in tests/worker/test_long_jobs.py."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.test import override_settings

from laterite_django import JobContext, Snooze
from laterite_django.core.checkpoint import Checkpoint, Iteration
from laterite_django.resumable import Checkpoints, ClaimLost, HandedOver, keyset_pages
from tests.testapp.jobs import numbers
from tests.testapp.models import Record


def context(checkpoints: Checkpoints | None = None) -> JobContext:
    cx = JobContext(id=1, name="tests.j", queue="default", attempt=1, pushed_at=datetime.now())
    if checkpoints is None:
        return cx
    return JobContext(id=1, name="tests.j", queue="default", attempt=1,
                      pushed_at=datetime.now(), checkpoints=checkpoints)


class Saved:
    """A store's load and save, in memory: what was saved, and whether the claim holds."""

    def __init__(self, text: str = "", held: bool = True) -> None:
        self.text = text
        self.held = held
        self.saves: list[str] = []

    def load(self) -> str:
        return self.text

    def save(self, text: str, durable: bool = True) -> bool:
        if self.held:
            self.text = text
            self.saves.append(text)
        return self.held


def test_iterate_a_fetch_function_saves_after_each_chunk():
    saved = Saved()
    cx = context(Checkpoints(saved.load, saved.save))
    assert cx.position is None
    got = []
    for n in cx.iterate(numbers(25), chunk=10):
        got.append(n)
        if n == 9:
            assert saved.saves == []  # the chunk is saved once it is done, not before
    assert got == list(range(25))
    assert [Checkpoint.parse(t).iterations[0] for t in saved.saves] == [
        Iteration(10, 10), Iteration(20, 20), Iteration(20, 25, finished=True)]


def test_iterate_resumes_after_the_saved_cursor_and_skips_a_finished_loop():
    saved = Saved('{"iterations":[{"cursor":null,"done":5,"finished":true},'
                  '{"cursor":30,"done":30}]}')
    cx = context(Checkpoints(saved.load, saved.save))
    assert list(cx.iterate(numbers(5), chunk=2)) == []
    second = cx.iterate(numbers(45), chunk=10)
    assert cx.position == 30
    assert list(second) == list(range(30, 45))
    assert Checkpoint.parse(saved.text).iterations[1] == Iteration(40, 45, finished=True)


@pytest.mark.django_db
@pytest.mark.parametrize("descending", [False, True])
def test_keyset_pages_walk_a_queryset_in_its_order(descending):
    Record.objects.bulk_create(Record(kind="k", value=f"{i % 3}", attempt=i) for i in range(20))
    order = ["-value", "-attempt"] if descending else ["value", "attempt"]
    rows = Record.objects.filter(kind="k").order_by(*order)
    fetch = keyset_pages(rows, ("value", "attempt"))
    got, cursor = [], None
    while True:
        items, cursor = fetch(cursor, 6)
        got += [(r.value, r.attempt) for r in items]
        if cursor is None:
            break
    assert got == list(rows.values_list("value", "attempt"))


@pytest.mark.django_db
def test_iterate_a_queryset_by_pk_resumes_from_its_cursor():
    Record.objects.bulk_create(Record(kind="k", value=str(i)) for i in range(30))
    ids = list(Record.objects.filter(kind="k").order_by("pk").values_list("pk", flat=True))
    saved = Saved(f'{{"iterations":[{{"cursor":{ids[9]},"done":10}}]}}')
    cx = context(Checkpoints(saved.load, saved.save))
    got = [r.pk for r in cx.iterate(Record.objects.filter(kind="k"), chunk=7)]
    assert got == ids[10:]
    assert Checkpoint.parse(saved.text).iterations[0].done == 30


@pytest.mark.django_db
def test_a_queryset_ordered_otherwise_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"ordered by \['-at'\], not by \['pk'\]"):
        keyset_pages(Record.objects.order_by("-at"), "pk")


@pytest.mark.parametrize(("source", "kwargs", "error", "match"), [
    (numbers(3), {"chunk": 0}, ValueError, "chunk must be an integer >= 1, got 0"),
    (numbers(3), {"chunk": True}, ValueError, "chunk must be an integer >= 1, got True"),
    (numbers(3), {"by": "pk"}, ValueError, "a fetch function keeps its own cursor"),
    ([1, 2, 3], {}, TypeError, "takes a queryset or a function .* not list"),
])
def test_bad_iterate_arguments_are_named(source, kwargs, error, match):
    with pytest.raises(error, match=match):
        context().iterate(source, **kwargs)


def test_a_fetch_function_that_returns_no_pair_is_named():
    with pytest.raises(TypeError,
                       match=r"returns \(items, next_cursor\), items a list, not \[1, 2\]"):
        list(context().iterate(lambda cursor, n: [1, 2]))


def test_a_cursor_that_is_not_json_is_named():
    with pytest.raises(TypeError, match="the cursor must be JSON, got <object"):
        list(context().iterate(lambda cursor, n: ([1], object())))


def test_a_stopping_worker_hands_over_at_the_next_chunk_boundary():
    stopping = [False]
    checkpoints = Checkpoints(stopping=lambda: stopping[0])
    got = []
    with pytest.raises(HandedOver):
        for n in context(checkpoints).iterate(numbers(50), chunk=10):
            got.append(n)
            stopping[0] = n >= 12
    assert got == list(range(20)) and checkpoints.handed_over
    assert checkpoints.value.iterations[0] == Iteration(20, 20)


def test_a_lost_claim_stops_the_job():
    saved = Saved(held=False)
    with pytest.raises(ClaimLost):
        list(context(Checkpoints(saved.load, saved.save)).iterate(numbers(50), chunk=10))


def test_a_step_runs_until_saved_and_gives_its_result_back():
    saved = Saved()
    cx = context(Checkpoints(saved.load, saved.save))
    with pytest.raises(ValueError), cx.step("charge") as step:
        assert step.todo
        raise ValueError("the card was declined")
    assert saved.saves == []  # a block that raised is not done
    with cx.step("charge") as step:
        assert step.todo
        step.result = {"charge": "ch_1"}
    later = context(Checkpoints(saved.load, saved.save))
    with later.step("charge") as step:
        assert (step.todo, step.result) == (False, {"charge": "ch_1"})
    assert len(saved.saves) == 1


def test_a_step_result_that_is_not_json_is_named_and_not_saved():
    saved = Saved()
    cx = context(Checkpoints(saved.load, saved.save))
    with pytest.raises(TypeError, match="the result of step 'x' must be JSON"), \
            cx.step("x") as step:
        step.result = {1, 2}
    assert saved.saves == []


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_step_needs_a_name(name):
    with pytest.raises(ValueError, match="a step's name is a non-empty string"), \
            context().step(name):
        pass


def test_snooze_raises_snooze():
    with pytest.raises(Snooze) as raised:
        context().snooze(30)
    assert raised.value.seconds == 30


def test_a_damaged_checkpoint_is_named():
    with pytest.raises(ValueError, match="not a job checkpoint: '\\[1'"):
        Checkpoint.parse("[1")


def test_a_checkpoint_round_trips_and_describes_itself():
    value = Checkpoint([Iteration(12500, 12500), Iteration(None, 3, True)],
                       {"charge": {"id": 1}}, 2)
    assert Checkpoint.parse(value.dump()) == value
    assert Checkpoint().dump() == ""
    assert value.describe() == ("12,500 items done, at 12500; 3 items done, finished; "
                                "steps done: charge; snoozed 2 times")


@override_settings(LATERITE_QUEUE_MODE="inline")
@pytest.mark.django_db
def test_inline_mode_iterates_and_steps_in_memory_and_raises_a_snooze():
    from tests.testapp import jobs

    jobs.walk.push(25, 10)
    assert sorted(int(v) for v in Record.objects.filter(kind="walk")
                  .values_list("value", flat=True)) == list(range(25))
    jobs.charge.push("o9")
    assert list(Record.objects.filter(kind="receipt").values_list("value", flat=True)) == [
        "ch_o9_1"]
    with pytest.raises(Snooze):
        jobs.snoozy.push("s", times=1, seconds=5)


def test_loops_cannot_nest():
    cx = context()
    with pytest.raises(ValueError, match="loops cannot nest"):
        for _ in cx.iterate(numbers(3)):
            list(cx.iterate(numbers(3)))
    assert list(cx.iterate(numbers(2))) == [0, 1]  # one after the other is fine


@pytest.mark.django_db
def test_values_rows_are_walked_by_the_field_as_named():
    Record.objects.bulk_create(Record(kind="v", value=str(i)) for i in range(12))
    rows = Record.objects.filter(kind="v").values("pk", "value")
    assert [r["value"] for r in context().iterate(rows, chunk=5)] == [str(i) for i in range(12)]


def test_a_step_result_is_given_as_later_runs_get_it():
    cx = context()
    with cx.step("pair") as step:
        step.result = (1, 2)
    assert step.result == [1, 2]
