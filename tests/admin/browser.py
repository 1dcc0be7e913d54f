"""What the admin's browser tests share (tests/admin/test_browser.py): headless Chromium
(Debian's `chromium` and `chromium-driver`) driven by Selenium against a live server,
as Django's own admin tests do, and screenshots under test-artifacts/admin/. Without
Chromium the tests are skipped locally; in CI (CI=true) a missing browser is a
failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.staticfiles.testing import StaticLiveServerTestCase
from django.test import override_settings

from tests.conftest import ROOT

__all__ = ["ARTIFACTS", "BrowserTestCase"]

ARTIFACTS = Path(os.environ.get("LATERITE_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "admin"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--window-size=1440,900", "--force-device-scale-factor=1",
    "--lang=en-US",
]


def _browser_paths() -> tuple[str, str]:
    """Return (chromium, chromedriver), or skip (fail in CI) saying what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromium-driver", driver))
               if path is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if missing:
        reason = (f"The browser test needs {', '.join(missing)}: "
                  f"apt-get install -y chromium chromium-driver")
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{reason} (CI must install them, so this is not skipped)")
        raise unittest.SkipTest(reason)
    return chromium, driver


@override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
class BrowserTestCase(StaticLiveServerTestCase):
    """A live server and one headless Chromium for the test class, with the helpers an
    operator's round trip needs: log in, open, find, wait, screenshot, measure."""

    @classmethod
    def setUpClass(cls) -> None:
        chromium, driver = _browser_paths()
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        super().setUpClass()
        cls.profile = tempfile.mkdtemp(prefix="laterite-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={cls.profile}"]:
            options.add_argument(flag)
        try:
            cls.browser = webdriver.Chrome(service=Service(driver), options=options)
        except Exception:
            super().tearDownClass()
            shutil.rmtree(cls.profile, ignore_errors=True)
            raise
        cls.browser.implicitly_wait(5)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.browser.quit()
        shutil.rmtree(cls.profile, ignore_errors=True)
        super().tearDownClass()

    def screenshot(self, name: str) -> None:
        """Save the whole page, beyond the window, as test-artifacts/admin/NAME.png."""
        import base64

        size = self.browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        shot = self.browser.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                     "scale": 1},
        })
        path = ARTIFACTS / f"{name}.png"
        path.write_bytes(base64.b64decode(shot["data"]))

    def open(self, path: str) -> None:
        self.browser.get(f"{self.live_server_url}{path}")

    def find(self, css: str):
        from selenium.webdriver.common.by import By

        return self.browser.find_element(By.CSS_SELECTOR, css)

    def wait_for(self, css: str):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.browser, 10).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))

    def log_in(self) -> None:
        get_user_model().objects.create_superuser("operator", "op@example.com", "s3cret-pw")
        self.open("/admin/")
        self.wait_for("#id_username").send_keys("operator")
        self.find("#id_password").send_keys("s3cret-pw")
        self.find("input[type=submit]").click()
        self.wait_for("#user-tools")

    def viewport(self, width: int, height: int = 900) -> None:
        """Make the page exactly `width` CSS pixels wide (until the next call)."""
        self.browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def nav_sidebar(self, shown: bool) -> None:
        """Show or fold the navigation sidebar (the browser remembers it), then reload."""
        self.browser.execute_script(
            "localStorage.setItem('django.admin.navSidebarIsOpen', arguments[0]);",
            "true" if shown else "false")
        self.browser.refresh()
        self.wait_for("#result_list")

    def overflow(self) -> dict:
        """How the list's table sits in its box: widths, and the last column's right edge."""
        return self.browser.execute_script("""
            const box = document.querySelector('#changelist .results');
            const cells = document.querySelectorAll('#result_list thead th');
            const last = cells[cells.length - 1].getBoundingClientRect();
            return {scroll: box.scrollWidth, client: box.clientWidth,
                    box_right: box.getBoundingClientRect().right, last_right: last.right,
                    page: document.documentElement.scrollWidth,
                    window: document.documentElement.clientWidth,
                    last: cells[cells.length - 1].innerText};
        """)
