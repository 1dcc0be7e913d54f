"""laterite_django: background jobs for Django.

Push work now, run it later in a worker, with retries, backoff, timeouts, a
retry window, unique jobs and a failed list. Imports no models, so it is safe
to import from settings-time code.
"""

from .context import JobContext, Pushed
from .exceptions import Fail, JobNotRegistered, PushFromEventLoop, Retry
from .jobs import JobFunction, job
from .registry import registry

__all__ = [
    "Fail",
    "JobContext",
    "JobFunction",
    "JobNotRegistered",
    "PushFromEventLoop",
    "Pushed",
    "Retry",
    "job",
    "registry",
]

__version__ = "0.2.0.dev0"
