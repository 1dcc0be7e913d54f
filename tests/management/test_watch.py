"""`queue_status --watch`: the status redrawn every second, with rates per queue."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from laterite_django.core.minutes import Minute, minute_start
from laterite_django.management.watch import CLEAR
from tests.conftest import ROOT, wait_for
from tests.testapp import jobs


def test_each_frame_shows_counts_oldest_waiting_and_rates(store):
    now = minute_start(timezone.now())
    store.add_minutes([Minute("default", now - timedelta(minutes=2), 60, 6),
                       Minute("elsewhere", now, 3, 0)])
    jobs.record.enqueue(("old",), {}, at=timezone.now() - timedelta(minutes=2, seconds=5))
    out = io.StringIO()
    call_command("queue_status", "--watch", "--frames", "2", "--interval", "0.05", stdout=out)
    frames = out.getvalue().split(CLEAR)[1:]
    assert len(frames) == 2
    lines = frames[-1].splitlines()
    assert lines[2].split() == ["queue", "waiting", "delayed", "running", "failed", "oldest",
                                "waiting", "succeeded/min", "failed/min"]
    rows = {line.split()[0]: line for line in lines[3:] if line.strip()}
    assert list(rows) == ["default", "mail", "low", "elsewhere"]
    default = rows["default"].split()
    assert default[1:5] == ["1", "0", "0", "0"]
    assert re.fullmatch(r"2 min [5-9] s|2 min 1\d s", " ".join(default[5:9]))
    done, failed = float(default[-2]), float(default[-1])
    assert 10 <= done <= 12 and 1 <= failed <= 1.2  # 60 and 6 over five minutes and a bit
    assert rows["mail"].split()[5] == "-"  # none waits


def test_ctrl_c_ends_it_cleanly(workers):
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "queue_status", "--watch", "--interval", "0.2"],
        cwd=ROOT, env=workers.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: proc.stdout.readline().strip(), timeout=30)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
