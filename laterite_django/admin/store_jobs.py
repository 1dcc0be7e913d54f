"""The Jobs list's rows on the Redis store: the jobs waiting, delayed and running in
Redis, above the list of the job table (which holds only what the database store left).

They are read through `RedisStore.browse_jobs`, a bounded window (stores/redis/browse.py:
of each queue's ready, delayed and claimed sets the jobs first in line, at most
`WINDOW` a page load), then filtered here by the list's own parameters: queue and
state (which narrow the sets read), name, argument (`?arg=order_id=8812`), time
pushed (`?since=`, `?until=`) and the search box (name or arguments containing the
term). The page says how many jobs were read of how many, so a search that found
nothing in a full window is not taken for "there is none".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..exceptions import StoreUnavailable
from ..stores import Store
from ..stores.database.matching import parse_argument, parse_moment
from ..stores.redis import RedisStore
from ..stores.redis.browse import STATES, WINDOW, Browsed, ListedJob
from .display import breakable, moment

__all__ = ["PAGE", "PAGE_PARAMETER", "StoreJobs", "store_jobs"]

# Rows a page shows, and the page's parameter (the job table's list has its own `p`).
PAGE = 100
PAGE_PARAMETER = "rp"


@dataclass(frozen=True)
class StoreJobs:
    """What the list shows of the store's own jobs."""

    store: str
    rows: list[ListedJob]  # this page's
    matched: int  # in the window, of the filters
    read: int  # jobs read
    total: int  # jobs the sets read from hold
    window: int
    page: int  # from 0
    errors: list[str]
    query: str = ""  # the request's parameters but the page's, for the page links

    @property
    def window_full(self) -> bool:
        return self.total > self.read

    @property
    def shown(self) -> list[dict[str, Any]]:
        """This page's rows as the table shows them."""
        return [{
            "job": job, "name": breakable(job.name), "queue": breakable(job.queue),
            "state": _state(job), "due": moment(job.available_at),
            "pushed": moment(job.pushed_at),
            "arguments": Truncator(job.payload).chars(120),
        } for job in self.rows]

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // PAGE))

    @property
    def previous_url(self) -> str:
        return self._page_url(self.page - 1) if self.page > 0 else ""

    @property
    def next_url(self) -> str:
        return self._page_url(self.page + 1) if self.page + 1 < self.pages else ""

    def _page_url(self, page: int) -> str:
        joined = f"{self.query}&" if self.query else ""
        return f"?{joined}{PAGE_PARAMETER}={page}"

    @property
    def first(self) -> int:
        return self.page * PAGE + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.page * PAGE + len(self.rows)


def store_jobs(request: HttpRequest, store: Store) -> StoreJobs | None:
    """The store's jobs matching the request's filters, or None when the store's jobs
    are the job table's (the database store)."""
    if not isinstance(store, RedisStore):
        return None
    params = request.GET
    errors: list[str] = []
    arguments = []
    for given in params.getlist("arg"):
        if given.strip():
            try:
                arguments.append(parse_argument(given))
            except ValueError as e:
                errors.append(str(e))
    moments: dict[str, datetime] = {}
    for name in ("since", "until"):
        if params.get(name, "").strip():
            try:
                moments[name] = parse_moment(params[name])
            except ValueError as e:
                errors.append(str(e))
    state = params.get("state") or None
    # A running job past retry_after is among the claimed; a job held behind its
    # sequence's head is in none of the sets read (the list has none to show).
    states: tuple[str, ...] = (STATES if state is None else ("running",)
                               if state == "abandoned" else () if state == "held" else (state,))
    if states and states[0] not in STATES:
        errors.append(f"{state!r} is not a state")
    try:
        page = max(0, int(params.get(PAGE_PARAMETER, "0")))
    except ValueError:
        page = 0
    if errors:
        return StoreJobs("redis", [], 0, 0, 0, WINDOW, 0, errors)
    queue = params.get("queue") or None
    try:
        browsed: Browsed = store.browse_jobs(None if queue is None else [queue], states, WINDOW)
    except StoreUnavailable as e:
        # Said in place of the rows, as the summary says it in place of its counts.
        return StoreJobs("redis", [], 0, 0, 0, WINDOW, 0, [str(e)])
    job_name = params.get("name") or None
    term = (params.get("q") or "").strip().casefold()
    kept = [job for job in browsed.jobs
            if (job_name is None or job.name == job_name)
            and (not term or term in job.name.casefold() or term in job.payload.casefold())
            and ("since" not in moments or (job.pushed_at is not None
                                            and job.pushed_at >= moments["since"]))
            and ("until" not in moments or (job.pushed_at is not None
                                            and job.pushed_at < moments["until"]))
            and all(_argument_is(job.payload, key, value) for key, value in arguments)]
    kept.sort(key=lambda job: job.id, reverse=True)
    rows = kept[page * PAGE:(page + 1) * PAGE]
    others = params.copy()
    others.pop(PAGE_PARAMETER, None)
    return StoreJobs("redis", rows, len(kept), len(browsed.jobs), browsed.total, WINDOW,
                     page, [], others.urlencode())


def _state(job: ListedJob) -> SafeString:
    pill = format_html('<span class="laterite-state laterite-state-{}">{}</span>',
                       job.state, job.state)
    if not job.claimed_by:
        return pill
    return format_html('{}<span class="laterite-claimed-by" title="claimed by">{}</span>',
                       pill, breakable(job.claimed_by))


def _argument_is(payload: str, key: str, value: Any) -> bool:
    """Whether the job's argument `key` (a keyword, or a position: digits) is `value`,
    as the database's argument filter matches it."""
    try:
        data = json.loads(payload)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    if key.isdigit():
        args = data.get("args")
        return isinstance(args, list) and int(key) < len(args) and args[int(key)] == value
    kwargs = data.get("kwargs")
    return isinstance(kwargs, dict) and key in kwargs and kwargs[key] == value
