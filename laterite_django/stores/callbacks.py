"""What the stores ask of the layers above them, through callbacks those layers set at
start-up (AppConfig.ready): the job of a stored workflow link (a chain's next, a batch's
callback: calls.link_job), the concurrency limit of a job stored again from
its payload (jobs.limit_of_payload), and the limits of a claim whose caller passed
none (flow.limits.limits_of; the worker passes its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.limits import Limits
from ..core.marks import marks_of
from ..core.values import Claim, NewJob

__all__ = ["limits_of", "link_job", "next_links", "set_fair_finder", "set_limit_finder",
           "set_limits_source", "set_link_maker", "with_fair_turn", "with_limit"]

LinkMaker = Callable[..., NewJob]
LimitFinder = Callable[[str, str], "tuple[int, str] | None"]
# (job name, queue, payload) -> (fair key, cost), or None for a queue not served fairly.
FairFinder = Callable[[str, str, str], "tuple[str | None, int] | None"]

_link_maker: LinkMaker | None = None
_limit_finder: LimitFinder | None = None
_fair_finder: FairFinder | None = None
_limits_source: Callable[[Sequence[str]], Limits] | None = None


def _unset(what: str) -> RuntimeError:
    return RuntimeError(f"laterite_django's {what} is not set: the app's ready() sets it "
                        "(is laterite_django in INSTALLED_APPS?)")


def set_link_maker(maker: LinkMaker) -> None:
    """Register what makes the job of a stored link (called by ready())."""
    global _link_maker
    _link_maker = maker


def link_job(link: Mapping[str, Any], *, chain: list[dict[str, Any]] | None = None,
             batch: tuple[int, int] | None = None) -> NewJob:
    """The job to store for a stored link (see calls.link_job)."""
    if _link_maker is None:
        raise _unset("link maker")
    return _link_maker(link, chain=chain, batch=batch)


def next_links(claim: Claim) -> list[NewJob]:
    """The job to push once `claim`'s job succeeded: its chain's next link, if any."""
    chain = marks_of(claim.payload).chain
    if not chain:
        return []
    return [link_job(chain[0], chain=chain[1:] or None)]


def set_limit_finder(finder: LimitFinder) -> None:
    """Register what finds the (limit, key) of a job from its name and payload (called by
    ready())."""
    global _limit_finder
    _limit_finder = finder


def with_limit(new: NewJob) -> NewJob:
    """Give a job stored again from its payload (retried from the failed list, moved
    from the outbox) the concurrency limit and key a push of its job gives it
    (flow/limits), so it runs under the same limit."""
    if new.concurrency_limit:
        return new
    if _limit_finder is None:
        raise _unset("limit finder")
    limited = _limit_finder(new.name, new.payload)
    if limited is not None:
        new.concurrency_limit, new.concurrency_key = limited
    return new


def set_fair_finder(finder: FairFinder) -> None:
    """Register what finds the (fair key, cost) of a job from its name and payload
    (called by ready())."""
    global _fair_finder
    _fair_finder = finder


def with_fair_turn(new: NewJob) -> NewJob:
    """Give a job stored again from its payload (retried from the failed list) the fair
    key and cost a push of its job gives it (core/fairness.py), so it takes a turn in
    its queue as a push would."""
    if new.fair_cost is not None:
        return new
    if _fair_finder is None:
        raise _unset("fair finder")
    fair = _fair_finder(new.name, new.queue, new.payload)
    if fair is not None:
        new.fair_key, new.fair_cost = fair
    return new


def set_limits_source(source: Callable[[Sequence[str]], Limits]) -> None:
    """Register what reads the limits of a claim's queues from the settings and the
    registry (called by ready())."""
    global _limits_source
    _limits_source = source


def limits_of(queues: Sequence[str]) -> Limits:
    """The limits of a claim of `queues` whose caller passed none."""
    if _limits_source is None:
        raise _unset("limits source")
    return _limits_source(queues)
