"""laterite_django: background jobs for Django.

Push work now, run it later in a worker, with retries, backoff, timeouts, a
retry window, unique jobs and a failed list. Imports no models, so it is safe
to import from settings-time code.
"""

from .context import JobContext, Pushed
from .exceptions import Cancelled, Fail, JobNotRegistered, PushFromEventLoop, Retry, Snooze
from .flow import cancel, pause_queue, resume_queue
from .jobs import JobFunction, job
from .registry import registry
from .workflows import add_to_batch, batch, cancel_batch, chain

__all__ = [
    "Cancelled",
    "Fail",
    "JobContext",
    "JobFunction",
    "JobNotRegistered",
    "PushFromEventLoop",
    "Pushed",
    "Retry",
    "Snooze",
    "add_to_batch",
    "batch",
    "cancel",
    "cancel_batch",
    "chain",
    "job",
    "pause_queue",
    "registry",
    "resume_queue",
]

__version__ = "0.2.0.dev0"
