"""The admin in a real browser: log in, open the failed list, retry a job, see it waiting;
both lists fit a 1400 px window with the navigation sidebar open; the batches, a
batch's page and its failed jobs, cancelling one.

Headless Chromium against a live server (tests/admin/browser.py). Each page is saved
as a screenshot under test-artifacts/admin/. Without Chromium the tests are skipped
locally; in CI (CI=true) a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import math
import os
import shutil
from datetime import timedelta

from django.contrib.auth import get_user_model

from laterite_django.models import FailedJob, Job, MinuteCount
from tests.admin.browser import ARTIFACTS, BrowserTestCase
from tests.conftest import ROOT, Workers
from tests.testapp import jobs


class AdminInBrowserTests(BrowserTestCase):
    """One operator's round trip through the admin, in headless Chromium."""

    def make_failures(self) -> None:
        """Fail two jobs in a real worker, then queue a few more that wait."""
        jobs.always_broken.push("order-1138")
        jobs.fail_now.push("user-42")
        result = Workers("database").run("--stop-when-empty")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(FailedJob.objects.count(), 2)
        for value in ("welcome-7", "welcome-8", "digest-9"):
            jobs.mail.push(value)
        jobs.record.push_at(_in_an_hour(), "nightly-report")
        jobs.low.push("cleanup")

    def test_retry_a_failed_job_from_its_page(self) -> None:
        self.make_failures()
        get_user_model().objects.create_superuser("operator", "op@example.com", "s3cret-pw")

        self.open("/admin/")
        self.wait_for("#id_username").send_keys("operator")
        self.find("#id_password").send_keys("s3cret-pw")
        self.screenshot("01-login")
        self.find("input[type=submit]").click()
        self.wait_for("#user-tools")

        self.open("/admin/laterite_django/failedjob/")
        self.wait_for("#result_list")
        # Fold the navigation sidebar to give the screenshots room.
        self.nav_sidebar(shown=False)
        summary = self.find("#laterite-summary").text
        self.assertIn("mail", summary)
        rows = self.browser.find_elements("css selector", "#result_list tbody tr")
        self.assertEqual(len(rows), 2)
        self.assertIn("ValueError: broken order-1138", self.find("#result_list").text)
        self.screenshot("02-failed-list")

        broken = FailedJob.objects.get(name="tests.always_broken")
        self.find(f'#result_list a[href*="/failedjob/{broken.pk}/change/"]').click()
        self.wait_for(".field-traceback pre")
        traceback = self.find(".field-traceback")
        self.assertIn("Traceback (most recent call last)", traceback.text)
        # The first frame is the job's own, not the worker's that called it.
        first_frame = traceback.text.split("Traceback (most recent call last):\n", 1)[1]
        self.assertIn("tests/testapp/jobs.py", first_frame.splitlines()[0])
        self.assertNotIn("laterite_django/worker", traceback.text)
        self.assertIn('"order-1138"', self.find(".field-payload_json").text)
        # Retry above the traceback, and again at the bottom.
        top, bottom = self.browser.find_elements("css selector", 'input[value="Retry"]')
        self.assertLess(top.location["y"], traceback.location["y"])
        self.assertGreater(bottom.location["y"], traceback.location["y"])
        self.screenshot("03-failed-detail")

        top.click()
        self.wait_for(".messagelist")
        self.assertIn("1 job put back on its queue.", self.find(".messagelist").text)
        self.assertTrue(self.browser.current_url.endswith("/admin/laterite_django/job/?queue=default"))
        retried = Job.objects.get(name="tests.always_broken")
        row = self.find(f'#result_list a[href*="/job/{retried.pk}/change/"]')
        row = row.find_element("xpath", "./ancestor::tr")
        self.assertIn("waiting", row.find_element("css selector", ".field-state").text)
        default = self.find('#laterite-summary tr[data-queue="default"] td[data-count="waiting"]')
        self.assertEqual(default.text, "1")
        self.screenshot("04-retried-waiting")
        self.assertFalse(FailedJob.objects.filter(pk=broken.pk).exists())
        self.assertEqual(retried.attempts, 0)

        # The retried job remembers the failure it came from...
        origin = f"Retried from failed job #{broken.pk}: ValueError: broken order-1138"
        self.find(f'#result_list a[href*="/job/{retried.pk}/change/"]').click()
        self.assertEqual(self.wait_for(".laterite-retried-from").text, origin)
        self.screenshot("05-retried-job")
        # ...and so does its failed row when it fails again.
        result = Workers("database").run("--stop-when-empty")
        self.assertEqual(result.returncode, 0, result.stderr)
        again = FailedJob.objects.get(name="tests.always_broken")
        self.open(f"/admin/laterite_django/failedjob/{again.pk}/change/")
        self.assertEqual(self.wait_for(".laterite-retried-from").text, origin)
        self.screenshot("06-failed-again")


    def test_both_lists_fit_1400_px_with_the_sidebar_open(self) -> None:
        """Every column shows, none behind a horizontal scrollbar, at 1400 px."""
        self.make_failures()
        now = _in_an_hour() - timedelta(hours=1)
        # The widest moment Django's DATETIME_FORMAT writes: the longest month, two-digit
        # day and hour, "p.m.". The lists must fit whatever the hour the test runs at.
        widest = now.replace(month=9, day=28, hour=22, minute=58)
        # A running job claimed by a worker on a long host name, a retried one.
        Job.objects.create(
            name="shop.notifications.send_order_confirmation", queue="notifications",
            payload='{"args": [1], "kwargs": {}}', pushed_at=now, available_at=now,
            attempts=3, token="t" * 32, claimed_at=now,
            claimed_by="ip-10-0-128-254.eu-west-1.compute.internal:123456",
            retry_until=now + timedelta(days=1))
        FailedJob.objects.create(
            name="shop.notifications.send_order_confirmation", queue="notifications",
            payload='{"args": [1], "kwargs": {}}', attempts=25, pushed_at=widest, failed_at=widest,
            error="smtplib.SMTPRecipientsRefused: {'someone.with.a.long.address@example.com': "
                  "(550, b'5.1.1 The email account that you tried to reach does not exist')}")
        self.log_in()
        self.viewport(1400)
        for path in ("/admin/laterite_django/job/", "/admin/laterite_django/failedjob/"):
            self.open(path)
            self.wait_for("#result_list")
            self.nav_sidebar(shown=True)
            self.assertTrue(self.find("#nav-sidebar").is_displayed())
            sizes = self.overflow()
            name = path.strip("/").rsplit("/", 1)[-1]
            self.screenshot(f"07-{name}-list-1400")
            self.assertLessEqual(sizes["scroll"], sizes["client"], sizes)
            self.assertLessEqual(sizes["last_right"], sizes["box_right"], sizes)
            self.assertLessEqual(sizes["page"], sizes["window"], sizes)

    def test_the_overview_charts_the_last_hour(self) -> None:
        """Background jobs > Overview: a chart per queue; saved as docs/admin-overview.png
        when LATERITE_SAVE_DOCS_SCREENSHOTS is set."""
        import random

        from django.utils import timezone

        from laterite_django.core.minutes import Minute, minute_start
        from laterite_django.stores import get_store

        self.make_failures()  # a real worker writes its counts as it stops
        now = minute_start(timezone.now())
        shape = random.Random(7)
        get_store().add_minutes([
            Minute(queue, now - timedelta(minutes=ago), int(base * (1.2 + shape.random())),
                   int(shape.random() < 0.15) * shape.randint(1, base // 4 + 1))
            for queue, base in (("default", 40), ("mail", 12))
            for ago in range(1, 58)
        ])
        # A day of latency samples: a backlog on `default` in the afternoon, `mail`
        # quiet. The workers sample what waits now (Store.sample_latency), so a shaped
        # day is written as the rows the database store keeps.
        for queue, peak in (("default", 900.0), ("mail", 20.0)):
            for quarter in range(96):
                hump = math.exp(-(((quarter - 60) / 7) ** 2))
                MinuteCount.objects.update_or_create(
                    queue=queue, minute=now - timedelta(minutes=15 * quarter),
                    defaults={"latency": round(0.4 + peak * hump * shape.random(), 1)})
        self.log_in()
        self.viewport(1400)
        self.open("/admin/laterite_django/")
        self.find("a[href='/admin/laterite_django/minutecount/']").click()
        self.wait_for(".laterite-chart")
        self.assertIn("Overview", self.browser.title)
        charts = self.browser.find_elements("css selector", "section.laterite-queue svg")
        self.assertGreaterEqual(len(charts), 9)  # default, mail, low: three charts each
        latency = self.browser.find_elements(
            "css selector", "section[data-queue='default'] .laterite-latency-chart rect")
        self.assertEqual(len(latency), 96)
        self.assertEqual(self.browser.execute_script(
            "return document.documentElement.scrollWidth <= "
            "document.documentElement.clientWidth"), True)
        self.screenshot("08-overview")
        if os.environ.get("LATERITE_SAVE_DOCS_SCREENSHOTS"):
            shutil.copy(ARTIFACTS / "08-overview.png", ROOT / "docs" / "admin-overview.png")

    def make_batches(self) -> dict[str, int]:
        """Batches in every state, run by a real worker: one finished, one failed, one
        cancelled, and one running (its jobs on the mail queue still wait)."""
        from laterite_django import batch, cancel_batch
        from laterite_django.models import Batch
        from tests.testapp.models import Record

        Record.objects.create(kind="gate", value="13")
        made = {
            "finished": batch([jobs.member.call(i) for i in range(8)],
                              then=jobs.record.call("thumbnails ready"),
                              name="thumbnails-2024").push().pk,
            "failed": batch([jobs.member.call(i) for i in range(10, 16)],
                            catch=jobs.record.call("import failed"),
                            name="import-customers").push().pk,
            "running": batch([*(jobs.member.call(i) for i in range(20, 26)),
                              *(jobs.mail.call(f"welcome-{i}") for i in range(4))],
                             then=jobs.record.call("album 7 published"),
                             catch=jobs.record.call("album 7 broken"),
                             finally_=jobs.step.call("unlock album 7"),
                             name="album-7").push().pk,
        }
        cancelled = batch([jobs.mail.call(f"digest-{i}") for i in range(5)],
                          finally_=jobs.record.call("digest over"), name="weekly-digest").push()
        cancel_batch(cancelled.pk)
        made["cancelled"] = cancelled.pk
        result = Workers("database").run("--stop-when-empty", "--queue", "default")
        self.assertEqual(result.returncode, 0, result.stderr)
        # The widest moment Django's DATETIME_FORMAT writes (see the lists' test above),
        # a year back: the oldest batch stays the oldest.
        now = _in_an_hour() - timedelta(hours=1)
        widest = now.replace(year=now.year - 1, month=9, day=28, hour=22, minute=58)
        Batch.objects.filter(pk=made["finished"]).update(created_at=widest, finished_at=widest)
        return made

    def test_the_batches_list_a_batch_and_cancelling_it(self) -> None:
        """Background jobs > Batches at 1400 px with the sidebar open: states, progress
        bars, counts; a batch's page with its callbacks and links to its jobs; cancel.
        Saved as docs/admin-batches.png when LATERITE_SAVE_DOCS_SCREENSHOTS is set."""
        from laterite_django.models import Batch

        made = self.make_batches()
        self.log_in()
        self.viewport(1400)
        self.open("/admin/laterite_django/")
        self.find("a[href='/admin/laterite_django/batch/']").click()
        self.wait_for("#result_list")
        self.nav_sidebar(shown=True)
        rows = self.browser.find_elements("css selector", "#result_list tbody tr")
        self.assertEqual(len(rows), 4)
        states = [row.find_element("css selector", ".field-state_and_progress .laterite-state").text
                  for row in rows]
        self.assertEqual(states, ["cancelled", "running", "failed", "finished"])
        bars = self.browser.find_elements("css selector", "#result_list progress")
        self.assertEqual(len(bars), 4)
        running = rows[1].find_element("css selector", ".laterite-progress").text
        self.assertEqual(running, "6 of 10 ended")
        sizes = self.overflow()
        self.screenshot("09-batches-list-1400")
        self.assertLessEqual(sizes["scroll"], sizes["client"], sizes)
        self.assertLessEqual(sizes["last_right"], sizes["box_right"], sizes)
        self.assertLessEqual(sizes["page"], sizes["window"], sizes)
        if os.environ.get("LATERITE_SAVE_DOCS_SCREENSHOTS"):
            shutil.copy(ARTIFACTS / "09-batches-list-1400.png", ROOT / "docs" / "admin-batches.png")

        # The failed batch's page: its catch, and a link to its failed job.
        self.find(f'#result_list a[href*="/batch/{made["failed"]}/change/"]').click()
        self.wait_for(".field-catch")
        self.assertEqual(self.find(".field-catch .readonly").text, 'tests.record("import failed")')
        self.assertEqual(self.find(".field-then .readonly").text, "-")
        self.screenshot("10-batch-detail")
        self.find("a.laterite-batch-link[href*='/failedjob/?batch=']").click()
        self.wait_for("#result_list")
        rows = self.browser.find_elements("css selector", "#result_list tbody tr")
        self.assertEqual(len(rows), 1)
        self.assertIn("member 13 is gated", rows[0].text)

        # The running batch's waiting jobs, then cancelling it (confirmed first).
        self.open(f"/admin/laterite_django/batch/{made['running']}/change/")
        self.find("a.laterite-batch-link[href*='/job/?batch=']").click()
        self.wait_for("#result_list")
        names = {row.find_element("css selector", ".field-job_name").text
                 for row in self.browser.find_elements("css selector", "#result_list tbody tr")}
        self.assertEqual(names, {"tests.mail"})
        self.open("/admin/laterite_django/batch/?state=running")
        self.find(f'#result_list input[value="{made["running"]}"]').click()
        from selenium.webdriver.support.ui import Select

        Select(self.find("select[name=action]")).select_by_value("cancel_batches")
        self.find("button[name=index]").click()
        confirm = self.wait_for('input[type=submit][value="Yes, cancel it"]')
        self.assertIn("Cancel 1 batch?", self.find("#content").text)
        self.screenshot("11-cancel-batch")
        confirm.click()
        self.wait_for(".messagelist")
        self.assertIn("1 batch cancelled: 4 waiting jobs removed now.",
                      self.find(".messagelist").text)
        self.assertEqual(Batch.objects.get(pk=made["running"]).state, "cancelled")


def _in_an_hour():
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() + timedelta(hours=1)


class WorkersInBrowserTests(BrowserTestCase):
    """Background jobs > Workers, reached from the overview, in headless Chromium."""

    def test_the_workers_page_lists_a_running_worker_and_a_lost_one(self) -> None:
        """A real queue_work holding a job, and one that stopped beating; saved as
        docs/admin-workers.png when LATERITE_SAVE_DOCS_SCREENSHOTS is set."""
        import signal

        from laterite_django.stores import get_store
        from tests.conftest import wait_for
        from tests.stores.test_store_workers import info, set_beat_back
        from tests.testapp.models import Record

        store = get_store()
        from django.utils import timezone

        store.beat_worker(info("worker-7f9c2:31", name="worker-7f9c2:31",
                               queues=["default", "mail"], version="0.2.0.dev0",
                               started_at=timezone.now() - timedelta(hours=5)))
        set_beat_back(store, "worker-7f9c2:31", 400)
        jobs.sleeper.push(60, "export-8812")
        pool = Workers("database")
        proc = pool.start("--queue", "default", "--queue", "mail")
        try:
            wait_for(lambda: Record.objects.filter(kind="sleeper-start").exists(), timeout=60)
            wait_for(lambda: any(w.pid == proc.pid and w.jobs for w in store.workers()),
                     timeout=60)
            self.log_in()
            self.viewport(1400)
            self.open("/admin/laterite_django/minutecount/")
            self.find("p.laterite-workers-link a").click()
            self.wait_for("#result_list")
            self.assertIn("Workers", self.browser.title)
            rows = self.browser.find_elements("css selector", "#result_list tbody tr")
            self.assertEqual(len(rows), 2)
            states = {row.get_attribute("data-worker"): row.find_element(
                "css selector", ".laterite-state").text for row in rows}
            self.assertEqual(states["worker-7f9c2:31"], "lost")
            [mine] = [row for row in rows if row.get_attribute("data-worker").endswith(
                f":{proc.pid}")]
            self.assertEqual(states[mine.get_attribute("data-worker")], "alive")
            [job_link] = mine.find_elements("css selector", ".laterite-worker-jobs a")
            self.assertEqual(self.browser.execute_script(
                "return document.documentElement.scrollWidth <= "
                "document.documentElement.clientWidth"), True)
            self.screenshot("12-workers")
            if os.environ.get("LATERITE_SAVE_DOCS_SCREENSHOTS"):
                shutil.copy(ARTIFACTS / "12-workers.png", ROOT / "docs" / "admin-workers.png")
            job_link.click()  # the job in its hand
            self.wait_for(".field-job_name, .field-name, #content-main")
            self.assertIn("tests.sleeper", self.find("#content").text)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            pool.stop_all()


class ConsoleInBrowserTests(BrowserTestCase):
    """The failed list searched by argument, and a retry of every job the search keeps,
    across more than one page, confirmed with the count."""

    def test_search_by_argument_then_retry_everything_it_keeps(self) -> None:
        """Saved as docs/admin-search.png when LATERITE_SAVE_DOCS_SCREENSHOTS is set."""
        import json

        from django.utils import timezone

        now = timezone.now()
        FailedJob.objects.bulk_create([
            FailedJob(name="tests.always_broken", queue="default" if i % 2 else "mail",
                      payload=json.dumps({"args": [], "kwargs": {
                          "order_id": 8812 if i < 130 else 9000 + i}}),
                      attempts=2, pushed_at=now - timedelta(minutes=10),
                      failed_at=now - timedelta(seconds=i),
                      error=("smtplib.SMTPException: 421 try again later" if i < 130 else
                             "ValueError: broken") + "\nTraceback (most recent call last):\n")
            for i in range(150)])
        self.log_in()
        self.viewport(1400)
        self.open("/admin/laterite_django/failedjob/")
        self.wait_for("#result_list")
        self.find("#laterite-arg").send_keys("order_id=8812")
        self.find(".laterite-console-form input[type=submit]").click()
        self.wait_for("#result_list")
        self.assertIn("arg=order_id%3D8812", self.browser.current_url)
        rows = self.browser.find_elements("css selector", "#result_list tbody tr")
        self.assertEqual(len(rows), 100)  # a page of the 130
        self.find("#action-toggle").click()
        question = self.wait_for(".actions .question a")
        self.assertIn("Select all 130", question.text)
        question.click()
        from selenium.webdriver.support.ui import Select

        Select(self.find("select[name=action]")).select_by_value("retry_selected")
        self.browser.save_screenshot(str(ARTIFACTS / "13-failed-search.png"))  # the window
        if os.environ.get("LATERITE_SAVE_DOCS_SCREENSHOTS"):
            shutil.copy(ARTIFACTS / "13-failed-search.png", ROOT / "docs" / "admin-search.png")
        self.find("button[name=index]").click()
        self.wait_for(".laterite-bulk-question")
        self.assertIn("Retry 130 failed jobs?", self.find("#content h1").text)
        self.screenshot("14-retry-confirmation")
        self.assertEqual(FailedJob.objects.count(), 150)  # nothing yet
        self.find("input[type=submit][value^='Yes']").click()
        self.wait_for("ul.messagelist")
        self.assertIn("130 jobs put back on their queues.", self.find("ul.messagelist").text)
        self.assertEqual(FailedJob.objects.count(), 20)
        self.assertEqual(Job.objects.count(), 130)
        self.assertFalse(FailedJob.objects.filter(payload__contains="8812").exists())
