"""A call of a job made but not pushed (`job.call(...)`): what chains and batches
are made of. It is checked and encoded as a push would be, so a bad argument fails
where the call is written, not when its turn comes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from . import encryption, payload
from .core.marks import with_marks
from .core.values import NewJob
from .push_checks import DEBOUNCE_NAMES
from .registry import registry

if TYPE_CHECKING:
    from .jobs import JobFunction

__all__ = ["JobCall", "from_link", "link_job"]


@dataclass(frozen=True, slots=True)
class JobCall:
    """`job(*args, **kwargs)`, to push later as part of a chain or a batch."""

    job: JobFunction
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]

    @classmethod
    def checked(cls, job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
                ) -> JobCall:
        """The call, once its arguments fit the function and encode as JSON; refused for
        a debounced job, which a chain or batch could not replace in place."""
        if job.debounce is not None or not DEBOUNCE_NAMES.isdisjoint(kwargs):
            raise ValueError(
                f"Job {job.name!r}: a debounced job cannot be part of a chain or a batch "
                f"(their jobs are pushed once, in their turn, never replaced); push it "
                f"with push(..., debounce=...) instead.")
        if job.sequence is not None:
            raise ValueError(
                f"Job {job.name!r} runs in a sequence: it cannot be part of a chain or a "
                f"batch, whose jobs are pushed in their own order; push it on its own.")
        job._check_registered()
        job._check_arguments(args, kwargs)
        payload.encode(job.name, args, kwargs)  # raises InvalidPayload naming the argument
        return cls(job, tuple(args), dict(kwargs))

    def __repr__(self) -> str:
        return f"<JobCall {self.job.name}>"

    def link(self) -> dict[str, Any]:
        """The call as a chain link or batch callback, stored as JSON: the arguments of an
        encrypted job sealed as in its payload (encryption.sealed_link)."""
        if self.job.encrypt:
            return encryption.sealed_link(self.job, self.args, self.kwargs)
        return {"job": self.job.name, "args": list(self.args), "kwargs": dict(self.kwargs)}

    def new_job(self, *, chain: list[dict[str, Any]] | None = None,
                batch: tuple[int, int] | None = None) -> NewJob:
        """The job to store for this call, marked with the rest of its chain and its
        place in a batch."""
        new = self.job.new_jobs([(self.args, self.kwargs)])[0]
        new.payload = with_marks(new.payload, chain, batch)
        return new


def from_link(link: Mapping[str, Any]) -> JobCall:
    """The call a stored link stands for; raises if its job is not registered here or
    its arguments no longer fit."""

    job = registry.get(str(link.get("job")))
    # Its encrypted arguments opened (here, in the worker that settles the job before
    # it), so that the keys computed from them are too; sealed again by new_job.
    args, kwargs = encryption.open_link(link)
    return JobCall.checked(job, args, kwargs)


def link_job(link: Mapping[str, Any], *, chain: list[dict[str, Any]] | None = None,
             batch: tuple[int, int] | None = None) -> NewJob:
    """The job to store for a stored link (a chain's next, a batch's callback), without
    a unique key. A link that cannot be made into its job (a job this process does
    not know, arguments that no longer fit) is stored all the same, as written: the
    worker that claims it moves it to the failed list with the reason, so nothing of
    the workflow is lost."""
    try:
        new = from_link(link).new_job(chain=chain, batch=batch)
    except Exception:
        now = timezone.now()
        kept = {"args": link.get("args", []), "kwargs": link.get("kwargs", {})}
        if payload.SEALED_KEY in link:  # encrypted arguments stay as they were sealed
            kept[payload.SEALED_KEY] = link[payload.SEALED_KEY]
        text = payload._encoder.encode(kept)
        return NewJob(name=str(link.get("job"))[:200], queue="default",
                      payload=with_marks(text, chain, batch), available_at=now, pushed_at=now,
                      delay=0.0)
    # Pushed once by the step that settles the job before it: a unique key could only
    # drop it (a duplicate waiting) and break the workflow.
    new.unique_key = None
    return new
