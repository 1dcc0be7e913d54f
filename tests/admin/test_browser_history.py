"""A job history record's timeline in a real browser (headless Chromium, as the admin's
other browser tests): a job that failed twice under a real worker, then succeeded, shows
each attempt on a line of its own, in order, within a 1400 px window. Saved as
docs/admin-record-timeline.png when LATERITE_SAVE_DOCS_SCREENSHOTS is set."""

from __future__ import annotations

import json
import os
import shutil

from django.test import override_settings

from laterite_django.models import JobRecord
from tests.admin.browser import ARTIFACTS, BrowserTestCase
from tests.conftest import ROOT, Workers
from tests.testapp import jobs

HISTORY = {"keep": "7d"}


@override_settings(LATERITE_QUEUE_HISTORY=HISTORY)
class RecordTimelineInBrowserTests(BrowserTestCase):
    def test_a_record_s_timeline_shows_each_attempt(self) -> None:
        jobs.flaky.push("order-8812", 3)
        result = Workers("database").run("--stop-when-empty",
                                         env={"LATERITE_TEST_HISTORY": json.dumps(HISTORY)})
        self.assertEqual(result.returncode, 0, result.stderr)
        record = JobRecord.objects.get()
        self.log_in()
        self.viewport(1400)
        self.open(f"/admin/laterite_django/jobrecord/{record.pk}/change/")
        self.wait_for(".laterite-timeline")
        lines = self.browser.find_elements("css selector", ".laterite-timeline tr")
        texts = [line.text for line in lines]
        self.assertTrue(texts[0].startswith("pushed"), texts)
        attempts = [t for t in texts if t.startswith("attempt ")]
        self.assertEqual([t.split()[1] for t in attempts], ["1", "2", "3"], texts)
        self.assertIn("RuntimeError: flaky attempt 1", attempts[0])
        self.assertIn("RuntimeError: flaky attempt 2", attempts[1])
        self.assertNotIn("flaky attempt", attempts[2])
        self.assertTrue(all(record.worker in t for t in attempts), texts)
        self.assertTrue(texts[-1].startswith("succeeded"), texts)
        self.assertEqual(self.browser.execute_script(
            "return document.documentElement.scrollWidth <= "
            "document.documentElement.clientWidth"), True)
        self.screenshot("20-record-timeline")
        if os.environ.get("LATERITE_SAVE_DOCS_SCREENSHOTS"):
            shutil.copy(ARTIFACTS / "20-record-timeline.png",
                        ROOT / "docs" / "admin-record-timeline.png")
