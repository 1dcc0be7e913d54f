"""Run jobs: `manage.py queue_work [--queue Q ...] [--processes N] [--stop-when-empty] ...`.

With one process the worker runs in the command's own process; with more, a
supervisor forks them, replaces each that dies or is recycled, and kills one
whose job is stuck past its timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from django.core.management.base import CommandError
from django.db import connections

from ...conf import settings, validate_all
from ...core.sizes import NAME_MAX
from ...exceptions import LateriteConfigurationError
from ...metrics.totals import Totals
from ...schedules.scheduler import Scheduler, SchedulerThread
from ...worker.execute import stuck_threads
from ...worker.health import LIVE_WITHIN, HealthServer
from ...worker.loop import Worker, WorkerStopped
from ...worker.shutdown import EarlyStops, early_stops, stop_signals
from ...worker.supervisor import Supervisor
from ...worker.tally import Tally
from ..arguments import at_most, non_negative_float, positive_float, positive_int
from ..console import add_console, banner, remove_console
from ..store_check import StoreCommand, wait_for_store
from ..wording import count as counted

if TYPE_CHECKING:
    from ...metrics.server import MetricsServer

# A claim's cost is mostly per statement: claims of up to 100 quick jobs drain a deep
# queue faster, while finished jobs are still deleted every SETTLE_EVERY (20).
DEFAULT_BATCH = 100
# A worker's name is stored as claimed_by (NAME_MAX characters); the supervisor
# adds "-<slot>" or ":supervisor" to it.
WORKER_NAME_MAX = NAME_MAX - 20

logger = logging.getLogger("laterite")


class Command(StoreCommand):
    help = "Run a worker that claims and runs jobs from the given queues."

    requires_system_checks = "__all__"

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="QUEUE",
            help="A queue to take from; repeat in priority order (default: "
            "LATERITE_QUEUE_QUEUES).",
        )
        parser.add_argument("--once", action="store_true", help="Run at most one job, then exit.")
        parser.add_argument(
            "--stop-when-empty", action="store_true", help="Exit 0 once no job is due."
        )
        parser.add_argument(
            "--wait-delayed", type=non_negative_float, default=0, metavar="SECONDS",
            help="With --stop-when-empty: first wait for delayed jobs (retries) due within "
            "SECONDS, and run them.",
        )
        parser.add_argument(
            "--processes", type=positive_int,
            help="Worker processes to run (default: LATERITE_QUEUE_WORKERS). With 1, the "
            "worker runs in this process; with more, a supervisor starts and watches them.",
        )
        parser.add_argument(
            "--max-jobs", type=positive_int,
            help="Replace a worker process after this many jobs (with one process: exit).",
        )
        parser.add_argument(
            "--max-memory", type=positive_int, metavar="MB",
            help="Replace a worker process once it holds more than this many MB, after "
            "its job (with one process: exit).",
        )
        parser.add_argument(
            "--grace", type=non_negative_float, metavar="SECONDS",
            help="After SIGTERM/SIGINT, give running jobs this long to finish, then stop "
            "them and return them to their queues (default: wait for them).",
        )
        parser.add_argument(
            "--max-seconds", type=positive_float, help="Claim no more after this many seconds."
        )
        parser.add_argument(
            "--sleep", type=positive_float,
            help="Seconds an idle worker waits before looking again "
            "(default: LATERITE_QUEUE_POLL).",
        )
        parser.add_argument(
            "--name", type=at_most(WORKER_NAME_MAX),
            help=f"This worker's name, shown as claimed_by (at most {WORKER_NAME_MAX} "
            "characters).",
        )
        parser.add_argument(
            "--batch", type=positive_int, default=DEFAULT_BATCH,
            help="The most due jobs one claim may take; claims grow toward it while the "
            f"queue is deep and its jobs quick (default {DEFAULT_BATCH}; 1 = one at a time).",
        )
        parser.add_argument(
            "--no-scheduler", action="store_true",
            help="Do not fire the recurring schedules here (by default every queue_work "
            "does, but --once; each tick is pushed once however many run).",
        )
        parser.add_argument(
            "--metrics-port", type=port_number, metavar="PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics for this worker "
            "and all its processes (needs prometheus-client: the `metrics` extra; 0 = any "
            "free port, logged).",
        )
        parser.add_argument(
            "--metrics-address", type=ip_address, metavar="ADDRESS",
            help="The address --metrics-port listens on, e.g. 127.0.0.1 or ::1 (default "
            "0.0.0.0: every IPv4 address of the host).",
        )
        parser.add_argument(
            "--health-port", type=port_number, metavar="PORT",
            help="Serve Kubernetes probes at http://HOST:PORT/livez (200 while this "
            "process's loop turns) and /readyz (200 while the store answers, else 503); "
            "0 = any free port, logged.",
        )
        parser.add_argument(
            "--health-address", type=ip_address, metavar="ADDRESS",
            help="The address --health-port listens on (default 0.0.0.0).",
        )

    def handle(self, *args, **options) -> None:
        try:
            # Also under --skip-checks: a bad setting stops the worker before any claim.
            validate_all()
        except LateriteConfigurationError as e:
            raise CommandError(str(e)) from e
        console = add_console(options["verbosity"], options.get("stderr"))
        # From here a stop signal is recorded, not fatal, until the worker's or the
        # supervisor's own handlers take it (replayed then).
        try:
            with early_stops() as early:
                self.work(options, early)
        finally:
            remove_console(console)

    def work(self, options: dict, early: EarlyStops) -> None:
        keep_connections_open()
        queues = options["queues"] or list(settings.QUEUES)
        processes = options["processes"] or settings.WORKERS
        if options["once"]:
            if options["processes"] not in (None, 1):
                raise CommandError("--once runs one job: it cannot take --processes "
                                   f"{options['processes']}.")
            processes = 1
        if processes > 1 and not hasattr(os, "fork"):
            raise CommandError(f"--processes {processes} needs os.fork(), which this "
                               "platform lacks; use --processes 1.")
        if options.get("metrics_address") and options.get("metrics_port") is None:
            raise CommandError(f"--metrics-address {options['metrics_address']} needs "
                               "--metrics-port.")
        if options.get("health_address") and options.get("health_port") is None:
            raise CommandError(f"--health-address {options['health_address']} needs "
                               "--health-port.")
        if options["wait_delayed"] and not options["stop_when_empty"]:
            raise CommandError(f"--wait-delayed {options['wait_delayed']:g} needs "
                               "--stop-when-empty.")
        max_memory = options["max_memory"] and options["max_memory"] * 1024 * 1024
        worker_options = {
            "batch": options["batch"],
            "stop_when_empty": options["stop_when_empty"],
            "wait_delayed": options["wait_delayed"],
            "max_jobs": options["max_jobs"],
            "sleep": options["sleep"],
            "max_memory": max_memory,
        }
        worker = Worker(
            queues,
            name=options["name"],
            once=options["once"],
            max_seconds=options["max_seconds"],
            **worker_options,
        )
        logger.info(banner(worker.store, queues, processes), extra={"action": "worker_banner"})
        # Served by a daemon thread of this process until it exits; from before the
        # wait for the store, so a scrape meanwhile says laterite_store_up 0.
        metrics = serve_metrics(options.get("metrics_port"), options.get("metrics_address"))
        # Likewise: /livez says 200 and /readyz 503 while the store is waited for.
        health = serve_health(options.get("health_port"), options.get("health_address"))
        # Once, before any worker: missing tables end the command (StoreNotMigrated,
        # one line); a store that is down is waited for, said once.
        if not wait_for_store(worker.store, give_up_after=options["max_seconds"]):
            return

        scheduler = self.scheduler(options)
        totals = None if metrics is None else metrics.totals
        if totals is not None:
            worker.tally = Tally(totals.add)
        if processes > 1:
            supervisor = Supervisor(
                processes, queues, name=options["name"], grace=options["grace"],
                max_seconds=options["max_seconds"], scheduler=scheduler, totals=totals,
                **worker_options,
            )
            if health is not None:
                health.watch(lambda: supervisor.stuck(LIVE_WITHIN))
            supervisor.run(handlers_set=early.replay)
            return
        if health is not None:
            health.watch(lambda: worker.heartbeat.stuck(LIVE_WITHIN))
        with stop_signals(worker.stop, worker.stop_now, grace=options["grace"]), \
                scheduler_thread(scheduler):
            early.replay()
            try:
                worker.run()
            except WorkerStopped:  # pragma: no cover - the loop catches it
                pass
            except KeyboardInterrupt as e:  # pragma: no cover - handlers replace SIGINT
                raise CommandError("Interrupted") from e
        stuck = stuck_threads()
        if stuck:
            # Python would wait at exit for threads that a timed-out job left blocked.
            self.stderr.write(f"Leaving {counted(len(stuck), 'thread')} of timed-out jobs behind.")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def scheduler(self, options: dict) -> Scheduler | None:
        """The scheduler of the configured schedules, unless --no-scheduler or --once
        (None too when there are none); a bad schedule ends the command, naming it."""
        if options["no_scheduler"] or options["once"]:
            return None
        try:
            scheduler = Scheduler()
        except LateriteConfigurationError as e:
            raise CommandError(str(e)) from e
        if not scheduler.schedules:
            scheduler.sweep_quietly()  # none to fire: only mark the ones taken out
            return None
        names = ", ".join(s.name for s in scheduler.schedules)
        logger.info("Scheduler: %s (%s)", counted(len(scheduler.schedules), "schedule"), names,
                    extra={"action": "scheduler_started", "schedules": names})
        return scheduler


@contextlib.contextmanager
def scheduler_thread(scheduler: Scheduler | None) -> Iterator[None]:
    """Run `scheduler` in a thread beside the worker (--processes 1) while inside."""
    thread = SchedulerThread(scheduler).start() if scheduler is not None else None
    try:
        yield
    finally:
        if thread is not None:
            thread.stop()


def port_number(value: str) -> int:
    """A TCP port for --metrics-port: 0 (any free one) to 65535."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, not {value!r}")
    return port


def ip_address(value: str) -> str:
    """An IPv4 or IPv6 address for --metrics-address (no host name, no port)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an IP address such as 127.0.0.1, 0.0.0.0 or ::1, not {value!r}"
        ) from None


def serve_metrics(port: int | None, address: str | None = None) -> MetricsServer | None:
    """Start the metrics server on `port` (on `address`, else on every IPv4 address),
    or nothing when `port` is None."""
    if port is None:
        return None
    try:
        from ...metrics.server import MetricsServer  # optional dependency: prometheus-client
    except ImportError as e:
        raise CommandError("--metrics-port needs prometheus-client (the 'metrics' extra): "
                           f"{e}") from e
    try:
        return MetricsServer(port, Totals(), address=address or "0.0.0.0")
    except OSError as e:
        where = f"--metrics-address {address} " if address else ""
        raise CommandError(f"{where}--metrics-port {port}: cannot serve metrics: {e}") from e


def serve_health(port: int | None, address: str | None = None) -> HealthServer | None:
    """Start the health probes' server on `port` (on `address`, else on every IPv4
    address), or nothing when `port` is None."""
    if port is None:
        return None
    try:
        return HealthServer(port, address=address or "0.0.0.0")
    except OSError as e:
        where = f"--health-address {address} " if address else ""
        raise CommandError(f"{where}--health-port {port}: cannot serve probes: {e}") from e


def keep_connections_open() -> None:
    """Keep this process's database connections open between jobs.

    Django's default CONN_MAX_AGE of 0 closes the connection at every
    close_old_connections(), which a worker calls around each job: a new
    connection per job costs more than the job. A positive CONN_MAX_AGE is kept;
    a broken connection is still replaced.
    """
    for alias in connections:
        if connections.settings[alias].get("CONN_MAX_AGE", 0) == 0:
            connections.settings[alias]["CONN_MAX_AGE"] = None
