"""One long `cx.iterate` job through rolling restarts and killed workers, on every store.

Four `queue_work --processes 1` workers share the default queue; one job walks ROWS
numbers in chunks of 500, writing one Record per chunk ("first-last", with its attempt
and its worker's pid) as the chunk's last number is done, before the cursor moves past
it. At random moments of the walk the test signals a worker: mostly the one running the
job (the pid of the last chunk written), now and then an idle one, and starts another
in its place, as a rolling restart does. A SIGTERM hands the job over at the next chunk
boundary, not charged a try; a SIGKILL leaves its claim to expire (retry_after 3 s) and
the next run starts from the last saved cursor.

- SIGTERMs only: every number once (a job of tries=1, so a charged hand-over fails it).
- SIGTERMs and SIGKILLs: every number at least once, at most one chunk again per kill
  (written, then killed before its cursor was saved), no failed job (tries=6: a try for
  each of up to 5 kills, none for the hand-overs).

Kept short in a normal run (20,000 numbers, 4 SIGTERMs, 2 SIGKILLs); the full run
(100,000 numbers, 10 SIGTERMs, 5 SIGKILLs):

    LATERITE_TEST_FULL=1 pytest tests/worker/test_long_jobs_chaos.py
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass, field

import pytest

from laterite_django.models import FailedJob
from tests.conftest import Stderr, Workers, short_or_full, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_processes import waiting

__all__: list[str] = []

pytestmark = pytest.mark.slow

CHUNK = 500
ROWS = int(short_or_full(20_000, 100_000))
TERMS = int(short_or_full(4, 10))
KILLS = int(short_or_full(2, 5))
POOL = 4
# Seconds the job sleeps in each chunk: the walk lasts long enough for every signal.
PAUSE = 0.1
# The signals come before the walk's last END chunks (a SIGTERM in the last chunk would
# let the job end there, on a worker that is stopping).
END = 3
# INFO: a worker's banner says it is up (its stop signals handled from then on).
ENV = {"LATERITE_TEST_RETRY_AFTER": "3", "LATERITE_TEST_LOG_LEVEL": "INFO"}


@dataclass
class Pool:
    """POOL workers; a signalled one is retired and another started in its place."""

    workers: Workers
    live: dict[int, tuple[subprocess.Popen, Stderr]] = field(default_factory=dict)
    retired: list[tuple[subprocess.Popen, Stderr, int]] = field(default_factory=list)

    def fill(self) -> None:
        while len(self.live) < POOL:
            proc = self.workers.start("--processes", "1", env=ENV)  # type: ignore[attr-defined]
            self.live[proc.pid] = (proc, Stderr(proc))

    def ready(self) -> list[int]:
        """The live workers that are up: a SIGTERM before that would end Python at once."""
        return [pid for pid, (_, err) in self.live.items()
                if any(" queue_work: " in line for line in err.lines)]

    def replace(self, pid: int, signum: int) -> None:
        proc, err = self.live.pop(pid)
        proc.send_signal(signum)
        self.retired.append((proc, err, signum))
        self.fill()

    def stop(self) -> None:
        """SIGTERM the live workers once up; every worker that was not killed exits 0."""
        wait_for(lambda: len(self.ready()) == len(self.live), timeout=60)
        for proc, err in self.live.values():
            proc.send_signal(signal.SIGTERM)
            self.retired.append((proc, err, signal.SIGTERM))
        self.live.clear()
        for proc, err, signum in self.retired:
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {proc.pid} did not stop after "
                            f"{signal.Signals(signum).name}:\n{err.text()[-3000:]}")
            if signum == signal.SIGTERM:
                assert code == 0, f"worker {proc.pid}: exit {code}\n{err.text()[-3000:]}"

    def log(self) -> str:
        return "".join(f"--- worker {p.pid}\n{e.text()[-1500:]}" for p, e, _ in self.retired)


@dataclass
class Sent:
    signum: int
    at_runner: bool
    after: int  # numbers done when it was sent


def last_chunk() -> tuple[int, int] | None:
    """The last number of the last chunk written, and the pid of its worker."""
    row = (Record.objects.filter(kind="span").order_by("-id")
           .values_list("value", "pid").first())
    return None if row is None else (int(row[0].split("-")[1]), row[1])


def plan(rng: random.Random, terms: int, kills: int) -> list[tuple[int, bool]]:
    """(signal, at the job's worker?) for each signal, in the order sent: a quarter of
    them at idle workers (the first of each kind always at the job's)."""
    signals = [signal.SIGTERM] * terms + [signal.SIGKILL] * kills
    rng.shuffle(signals)
    at_runner = [rng.random() >= 0.25 for _ in signals]
    firsts = {signals.index(s) for s in set(signals)}
    for i in firsts:
        at_runner[i] = True
    others = [i for i in range(len(signals)) if i not in firsts]
    if all(at_runner) and others:
        at_runner[rng.choice(others)] = False
    return list(zip(signals, at_runner, strict=True))


def next_moment(rng: random.Random, left: int) -> int:
    """The last number of a chunk a little ahead, picked at random so that the `left`
    signals still to send fit before the walk's last END chunks."""
    last = last_chunk()
    done = 0 if last is None else (last[0] + 1) // CHUNK
    room = ROWS // CHUNK - END - done
    return (done + rng.randint(1, max(1, room // left))) * CHUNK - 1


def moment(pool: Pool, after: int, at_runner: bool) -> tuple[int, int, list[int]] | None:
    """Once `after` numbers are done, on a worker not yet signalled (and with an idle
    worker up, if one is aimed at): the numbers done, the job's worker, the idle ones."""
    last = last_chunk()
    if last and last[0] == ROWS - 1:
        pytest.fail(f"the walk ended before the signals did (on worker {last[1]})")
    if not last or last[0] < after or last[1] not in pool.live:
        return None
    idle = [pid for pid in pool.ready() if pid != last[1]]
    return (*last, idle) if idle or at_runner else None


def chaos(store, workers, job, terms: int, kills: int, seed: int) -> tuple[list[Sent], Pool]:
    """Push `job` over ROWS numbers and signal its workers as planned; return once done."""
    rng = random.Random(seed)
    pool = Pool(workers)
    pool.fill()
    job.push(ROWS, CHUNK, pause=PAUSE)
    sent: list[Sent] = []
    try:
        signals = plan(rng, terms, kills)
        for i, (signum, at_runner) in enumerate(signals):
            after = next_moment(rng, len(signals) - i)
            done, runner, idle = wait_for(lambda a=after, r=at_runner: moment(pool, a, r),
                                          timeout=120, every=0.02)
            time.sleep(rng.uniform(0, PAUSE))  # anywhere in a chunk
            target = runner if at_runner else rng.choice(idle)
            pool.replace(target, signum)
            sent.append(Sent(signum, at_runner, done))
        wait_for(lambda: not waiting(store), timeout=180, every=0.2)
    except BaseException:
        print(pool.log())
        raise
    finally:
        pool.stop()
    return sent, pool


def coverage() -> tuple[list[int], list[tuple[int, int]], set[int]]:
    """How many times each number was recorded, the chunks recorded, the attempts."""
    times = [0] * ROWS
    spans = []
    attempts = set()
    for value, attempt in Record.objects.filter(kind="span").values_list("value", "attempt"):
        first, last = (int(n) for n in value.split("-"))
        spans.append((first, last))
        attempts.add(attempt)
        for n in range(first, last + 1):
            times[n] += 1
    return times, spans, attempts


def check_chunks(spans: list[tuple[int, int]]) -> None:
    """Every chunk recorded starts at a saved cursor: on the chunk grid, whole."""
    for first, last in spans:
        assert first % CHUNK == 0 and last == min(first + CHUNK, ROWS) - 1, (first, last)


def summary(sent: list[Sent], attempts: set[int], twice: int, began: float) -> str:
    def count(signum: int, at_runner: bool) -> int:
        return sum(1 for s in sent if s.signum == signum and s.at_runner == at_runner)

    return (f"\n{ROWS:,} numbers in chunks of {CHUNK}: SIGTERM {count(signal.SIGTERM, True)} "
            f"at the job's worker + {count(signal.SIGTERM, False)} idle, SIGKILL "
            f"{count(signal.SIGKILL, True)} + {count(signal.SIGKILL, False)}; "
            f"{len(attempts)} attempts, {twice} numbers twice, "
            f"{time.monotonic() - began:.1f} s")


def test_rolling_restarts_walk_every_row_once(store, workers):
    began = time.monotonic()
    sent, _ = chaos(store, workers, jobs.spans, TERMS, 0, seed=11)
    times, spans, attempts = coverage()
    twice = sum(t - 1 for t in times if t > 1)
    print(summary(sent, attempts, twice, began))
    assert not FailedJob.objects.exists(), FailedJob.objects.first().error
    assert len(sent) == TERMS
    check_chunks(spans)
    assert [n for n, t in enumerate(times) if t != 1] == []
    # The job moved: each SIGTERM at its worker handed it over to a new attempt.
    assert len(attempts) >= 1 + sum(s.at_runner for s in sent)


def test_restarts_and_kills_lose_no_row(store, workers):
    began = time.monotonic()
    sent, pool = chaos(store, workers, jobs.spans_sturdy, TERMS, KILLS, seed=12)
    times, spans, attempts = coverage()
    twice = sum(t - 1 for t in times if t > 1)
    print(summary(sent, attempts, twice, began))
    failed = FailedJob.objects.first()
    assert failed is None, f"{failed.error}\n{pool.log()}"
    assert len(sent) == TERMS + KILLS
    check_chunks(spans)
    assert [n for n, t in enumerate(times) if t == 0] == []
    kills = sum(1 for s in sent if s.signum == signal.SIGKILL)
    # A kill between a chunk's records and its saved cursor: that chunk once more.
    assert twice <= kills * CHUNK, twice
    assert len(spans) - len(set(spans)) <= kills
