"""How the Redis store claims jobs: the CLAIM script, pipelined behind the deletion of
the worker's finished jobs (DELETE, or FINISH for jobs of a chain or batch), or the
limited claim (redis_limits) when a limit may apply; and the heartbeat that keeps
the claims held. A mixin of RedisStore."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.ending import any_marked
from ...core.limits import Limits
from ...core.values import Claim
from ..callbacks import limits_of
from ..errors import guarded
from . import limits as redis_limits
from . import workflows as redis_ends
from .scripts import ScriptRunner, run_claim
from .values import claims as claims_from_rows

__all__ = ["AGAIN_WITHIN", "RedisClaiming"]

# How far back (microseconds) a claim sent again, its answer lost, looks for the jobs
# its first run took (a socket's timeout and a reconnect later). Sent later still, it
# claims anew, and those jobs wait for the sweep. Every live claim was refreshed
# within retry_after anyway: a longer look reads no more of them.
AGAIN_WITHIN = 600_000_000


class RedisClaiming(ScriptRunner):
    """RedisStore's claim, settle_and_claim and heartbeat."""

    if TYPE_CHECKING:  # the store's own
        def delete(self, claims: Sequence[Claim]) -> int: ...

    @guarded
    def claim(self, queues: Sequence[str], worker: str, limit: int = 1,
              limits: Limits | None = None) -> list[Claim]:
        if not queues or limit < 1:
            return []
        if self._limited(queues, limits):
            return self.settle_and_claim((), queues, worker, limit, limits)
        token = uuid.uuid4().hex
        rows = run_claim(self.client, "claim", [
            self.prefix, *self._claim_args(token, queues, worker, limit)])
        return claims_from_rows(rows, token)

    @guarded
    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1,
        limits: Limits | None = None,
    ) -> list[Claim]:
        """Delete the finished jobs and claim the next ones in one round trip (a pipeline)."""
        limited = self._limited(queues, limits) if queues and limit >= 1 else None
        if limited is not None:
            # A limit may apply: the limited claim (redis_limits), after the deletions.
            if finished:
                self.delete(finished)
            token = uuid.uuid4().hex
            rows = run_claim(self.client, "claim_limited", [
                self.prefix,
                *redis_limits.claim_args(AGAIN_WITHIN, token, worker, limit, queues, limited)])
            return claims_from_rows(rows, token)
        if finished and any_marked(finished) and queues and limit >= 1:
            # Jobs of a chain or batch: deleted with what their end brings (FINISH),
            # then the claim, in one round trip.
            name, args, ended = redis_ends.finish_step(self, finished)  # type: ignore[arg-type]
            if name == "finish_limited":  # not pipelined: run alone, then the claim
                self.delete(finished)
                return self.claim(queues, worker, limit, limits)
            token = uuid.uuid4().hex
            ran_late: list[int] = []
            _, rows = self._pipeline([
                (name, args), ("claim", self._claim_args(token, queues, worker, limit))],
                ran_late)
            if ended:
                redis_ends.listed(self)  # type: ignore[arg-type]
            if not rows and ran_late == [0]:
                # Redis did not know FINISH yet (its first use since a restart, a
                # failover or SCRIPT FLUSH): it ran after the CLAIM, which could not
                # find the next links it pushed. Claimed now, or a worker that stops
                # when empty would stop with the rest of the chain waiting.
                return self.claim(queues, worker, limit, limits)
            return claims_from_rows(rows, token)
        if not finished:
            return self.claim(queues, worker, limit, limits)
        if not queues or limit < 1:
            self.delete(finished)
            return []
        token = uuid.uuid4().hex
        _, rows = self._pipeline([
            ("delete", [value for c in finished for value in (c.id, c.token)]),
            ("claim", self._claim_args(token, queues, worker, limit)),
        ])
        return claims_from_rows(rows, token)

    @staticmethod
    def _limited(queues: Sequence[str], limits: Limits | None) -> dict | None:
        """The limits of `queues` if a limit may apply to their claim, else None (`limits`:
        those the caller passed, or None to read them through stores.callbacks)."""
        if limits is None:
            limits = limits_of(queues)
        return limits.queues if limits else None

    @staticmethod
    def _claim_args(token: str, queues: Sequence[str], worker: str, limit: int) -> list:
        return [AGAIN_WITHIN, token, worker, int(limit), "0", *queues]

    @guarded
    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        pairs = [value for c in claims for value in (c.id, c.token)]
        return int(self._run("heartbeat", pairs))
