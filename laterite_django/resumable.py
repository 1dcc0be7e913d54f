"""Long jobs that pick up where they stopped: `cx.iterate`, `cx.step` and the checkpoint
they save.

A job walks its rows in chunks (`cx.iterate`); after each chunk the cursor is saved
with the job under its claim (the store's `save_checkpoint`, which a worker whose
claim was lost cannot do). When its worker is asked to stop, the job ends at the next
chunk boundary and goes back to its queue, due now, not charged a try; a later run,
after that or after a crash, starts from the last saved cursor. `cx.step(name)` saves
a block's result once the block has run, and later runs get that result instead of
running it again. Where nothing is stored (inline mode), the checkpoint lives in
memory for the one run.

A worker saves a cursor behind the walk (`CursorWriter`) where the store can send it
without waiting for the answer (its `cursor_sender`: PostgreSQL, Redis), on a connection
of its own, while the job fetches its next chunk; the answer is read before that chunk's
items are handed on, so at most one save is in flight, a lost claim stops the job before
it does more, and a job never sees a save unfinished. Elsewhere (SQLite, whose write
costs less than a hand-over to a thread, a Redis Cluster), and inside the job's own
transaction on the store's database (the cursor then commits with the job's work), the
walk saves its cursor itself between two chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Model, Q, QuerySet

from .core.checkpoint import Checkpoint, CursorSender, Iteration
from .core.crash_points import crash_point

__all__ = ["Checkpoints", "ClaimLost", "CursorWriter", "HandedOver", "Sent", "Step",
           "keyset_pages"]

# A page fetcher: (cursor, how many) -> (items, the cursor after them; None at the end).
Fetch = Callable[[Any, int], tuple[Sequence[Any], Any]]


class HandedOver(BaseException):
    """Raised at a chunk boundary of `cx.iterate` when the job's worker is stopping: the
    job goes back to its queue with its cursor. A BaseException, so that a job's own
    `except Exception` lets it through (and the worker goes by the flag it set, should
    a job swallow it all the same)."""


class ClaimLost(BaseException):
    """Raised in a job whose checkpoint could not be saved because its claim was taken
    back (its worker stopped beating): another run owns the job, and keeps what it
    saved. The attempt ends; its settling finds the claim lost and changes nothing."""


@dataclass(slots=True)
class Step:
    """One `cx.step` block: `todo` is True until a run of the block has completed and
    been saved; `result` is what the block set (saved with it, given back later)."""

    name: str
    todo: bool
    result: Any = None


class Sent:
    """A cursor save under way: `result` waits for it (True: saved, the claim held). An
    answer that cannot be read (the sender's connection lost) makes the save again with
    `again`, the usual way."""

    def __init__(self, answer: Callable[[], bool], again: Callable[[], bool]) -> None:
        self._answer = answer
        self._again = again

    def result(self) -> bool:
        try:
            return self._answer()
        except Exception:
            return self._again()

    def settle(self) -> None:
        """Wait for it, whatever it gives (a walk that ends by an error)."""
        with suppress(Exception):
            self.result()


class CursorWriter:
    """Sends `cx.iterate`'s cursors behind the walk with the store's sender (made by
    `sender()`, Store.cursor_sender), one at a time: `send` starts a save, its `result`
    waits for it. Without a sender (SQLite, a Redis Cluster), or once it failed, `send`
    gives None and the walk saves its cursors itself with `save`. `close` ends the
    sender when the walk ends."""

    def __init__(self, save: Callable[[str, bool], bool],
                 sender: Callable[[], CursorSender | None]) -> None:
        self._save = save
        self._make_sender: Callable[[], CursorSender | None] | None = sender
        self._sender: CursorSender | None = None

    def send(self, text: str) -> Sent | None:
        """Start saving `text` (not durable, as a cursor is); None: save it yourself."""
        if self._make_sender is not None:
            make, self._make_sender = self._make_sender, None
            try:
                self._sender = make()
            except Exception:  # the store away: the walk's own saves wait it out
                self._sender = None
        if self._sender is None:
            return None
        try:
            answer = self._sender.send(text)
        except Exception:
            self.close()
            return None
        return Sent(answer, lambda: self._saved_again(text))

    def _saved_again(self, text: str) -> bool:
        """The save of `text` made the usual way: the sender's answer could not be read
        (the sender is dropped; the walk saves the cursors that follow itself)."""
        self.close()
        return self._save(text, False)

    def close(self) -> None:
        """End the sender (its connection closed or given back)."""
        sender, self._sender, self._make_sender = self._sender, None, None
        if sender is not None:
            with suppress(Exception):
                sender.close()


class Checkpoints:
    """One run's checkpoint: read from the store on first use, saved under the claim.

    `load` and `save` are the store's, bound to the claim (None: nothing is stored, the
    checkpoint lives in memory); `stopping` tells whether the worker was asked to stop;
    `report` takes `cx.iterate`'s progress (items done) for the admin and queue_status;
    `behind`, if given, tells whether a cursor may be saved now behind the walk, while
    the next chunk is fetched (False: in the job's thread, see the module docstring),
    `sender` gives the store's way to send it (CursorWriter).
    """

    def __init__(
        self,
        load: Callable[[], str] | None = None,
        save: Callable[[str, bool], bool] | None = None,
        stopping: Callable[[], bool] = lambda: False,
        report: Callable[[int, Any], None] | None = None,
        behind: Callable[[], bool] | None = None,
        sender: Callable[[], CursorSender | None] | None = None,
    ) -> None:
        self._load = load
        self._save = save
        self._stopping = stopping
        self._report = report
        self._behind = behind
        self._sender = sender
        self._value: Checkpoint | None = None
        self._loops = 0  # cx.iterate calls made in this run
        self._current: Iteration | None = None
        self._walking = False  # a cx.iterate loop of this run is under way
        self.handed_over = False

    @property
    def value(self) -> Checkpoint:
        """The checkpoint, read on first use."""
        if self._value is None:
            self._value = Checkpoint.parse(self._load() if self._load is not None else "")
        return self._value

    @property
    def position(self) -> Any:
        """The saved cursor of the loop running now (None before its first chunk)."""
        return None if self._current is None else self._current.cursor

    def save(self, durable: bool = True) -> None:
        """Store the checkpoint under the claim (`durable`: see Store.save_checkpoint);
        raise ClaimLost if the claim was lost."""
        if self._save is not None and not self._save(self.value.dump(), durable):
            raise ClaimLost("the job's claim was taken back: its checkpoint was not saved")

    def snoozed(self) -> str:
        """The checkpoint text with one more snooze counted (stored with the release)."""
        self.value.snoozes += 1
        return self.value.dump()

    # -- cx.iterate ------------------------------------------------------------------

    def iterate(self, source: Any, by: str | Sequence[str] | None = None,
                chunk: int = 100) -> Iterator[Any]:
        """The items of `source`, chunk by chunk, from the saved cursor on (see
        JobContext.iterate)."""
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"cx.iterate: chunk must be an integer >= 1, got {chunk!r}")
        if isinstance(source, QuerySet):
            fetch = keyset_pages(source, "pk" if by is None else by)
        elif callable(source):
            if by is not None:
                raise ValueError("cx.iterate: `by` names the fields of a queryset; a fetch "
                                 f"function keeps its own cursor (got by={by!r})")
            fetch = source
        else:
            raise TypeError(
                f"cx.iterate takes a queryset or a function fetch(cursor, n) -> (items, "
                f"next_cursor), not {type(source).__name__}")
        if self._walking:
            raise ValueError(
                "cx.iterate: loops cannot nest (a resumed run could not tell the inner "
                "loops apart); iterate over the outer items' pages and do the inner work "
                "in the loop's body")
        place = self.value.iteration(self._loops)
        self._loops += 1
        self._current = place
        return self._walk(place, fetch, chunk)

    def _walk(self, place: Iteration, fetch: Fetch, chunk: int) -> Iterator[Any]:
        self._walking = True
        writer = CursorWriter(self._save, self._sender) if (
            self._save is not None and self._behind is not None
            and self._sender is not None) else None
        try:
            yield from self._chunks(place, fetch, chunk, writer)
        finally:
            self._walking = False
            if writer is not None:
                writer.close()

    def _chunks(self, place: Iteration, fetch: Fetch, chunk: int,
                writer: CursorWriter | None) -> Iterator[Any]:
        sent: Sent | None = None  # the last chunk's cursor, being saved
        try:
            while not place.finished:
                if self._stopping():
                    self._saved(sent)  # written before the job goes back
                    sent = None
                    self.handed_over = True
                    raise HandedOver(f"stopping: handed over at {json.dumps(place.cursor)}")
                found = fetch(place.cursor, chunk)
                self._saved(sent)  # saved meanwhile: written before more is done
                sent = None
                if not (isinstance(found, tuple | list) and len(found) == 2
                        and isinstance(found[0], Sequence) and not isinstance(found[0], str)):
                    raise TypeError(f"cx.iterate: a fetch function returns (items, "
                                    f"next_cursor), items a list, not {found!r:.200}")
                items, after = found
                yield from items
                # The chunk is done (the loop asked for what follows it): save past it.
                place.done += len(items)
                if after is None:
                    place.finished = True
                else:
                    place.cursor = _json_value(after, "the cursor")
                if (writer is not None and not place.finished and self._behind is not None
                        and self._behind()):
                    sent = writer.send(self.value.dump())  # saved while the next is fetched
                if sent is None:
                    # A cursor lost to a server's crash: a chunk again.
                    self.save(durable=False)
                    crash_point("iterate.after_save")  # past a chunk not yet handed on
                if self._report is not None:
                    self._report(place.done, place.cursor)
        finally:
            if sent is not None:  # a fetch raised: its chunk's cursor written all the same
                sent.settle()

    def _saved(self, sent: Sent | None) -> None:
        """Wait for the cursor save `sent` (if any) to end; raise ClaimLost if the claim
        was lost, or what the save raised."""
        if sent is not None:
            if not sent.result():
                raise ClaimLost("the job's claim was taken back: its checkpoint was not saved")
            crash_point("iterate.after_save")  # the cursor past a chunk not yet handed on

    # -- cx.step ---------------------------------------------------------------------

    @contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """A block whose completion is saved (see JobContext.step)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"cx.step: a step's name is a non-empty string, got {name!r}")
        saved = self.value.steps
        step = Step(name, todo=name not in saved, result=saved.get(name))
        yield step
        if step.todo:  # the block ran to its end: saved before anything else happens
            # As later runs will get it back: JSON (a tuple becomes a list).
            step.result = saved[name] = _json_value(step.result,
                                                    f"the result of step {name!r}")
            self.save()
            crash_point("step.after_save")  # the step saved, the job's next line not run


def keyset_pages(queryset: QuerySet, by: str | Sequence[str]) -> Fetch:
    """A fetch function over `queryset` by keyset pagination on the fields `by`: each
    page holds the rows after the last one's values in the queryset's order (never an
    OFFSET, so a page costs the same at row 10 and at row 10 million)."""
    fields = [by] if isinstance(by, str) else list(by)
    if not fields or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"cx.iterate: `by` names one field or a tuple of fields, got {by!r}")
    pk = queryset.model._meta.pk
    assert pk is not None
    names = [pk.name if f == "pk" else f for f in fields]
    ordering = [o for o in queryset.query.order_by if isinstance(o, str)]
    if not ordering and queryset.query.default_ordering:
        ordering = [o for o in queryset.model._meta.ordering if isinstance(o, str)]
    if ordering:
        ordered = [pk.name if o.lstrip("-") == "pk" else o.lstrip("-") for o in ordering]
        if ordered != names:
            raise ValueError(
                f"cx.iterate: the queryset is ordered by {ordering}, not by {fields}: order "
                f"it by the fields of `by` (or not at all)")
        descending = [o.startswith("-") for o in ordering]
    else:
        queryset = queryset.order_by(*names)
        descending = [False] * len(names)

    def fetch(cursor: Any, n: int) -> tuple[list[Any], Any]:
        page = queryset
        if cursor is not None:
            values = [cursor] if len(names) == 1 else list(cursor)
            page = page.filter(_after(names, descending, values))
        items = list(page[:n])
        if len(items) < n:
            return items, None
        last = [_field(items[-1], name, given) for name, given in zip(names, fields,
                                                                       strict=True)]
        return items, last[0] if len(names) == 1 else last

    return fetch


def _after(names: list[str], descending: list[bool], values: list[Any]) -> Q:
    """The rows after `values` in the order of `names`: (a > x) OR (a = x AND b > y)..."""
    after = Q()
    for i, name in enumerate(names):
        lookup = "lt" if descending[i] else "gt"
        term = Q(**{f"{name}__{lookup}": values[i]})
        for j in range(i):
            term &= Q(**{names[j]: values[j]})
        after |= term
    return after


def _field(item: Any, name: str, given: str) -> Any:
    """The value of field `name` (`given` as the caller named it, "pk" say) of a model
    instance, or of a `.values()` row keyed by either name."""
    if isinstance(item, dict):
        value = item[given] if given in item else item[name]
    else:
        value = getattr(item, name)
    return value.pk if isinstance(value, Model) else value


def _json_value(value: Any, what: str) -> Any:
    """`value` as JSON will give it back (dates as ISO text), or TypeError naming it."""
    try:
        return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
    except (TypeError, ValueError) as e:
        raise TypeError(f"cx: {what} must be JSON, got {value!r:.200} ({e})") from e
