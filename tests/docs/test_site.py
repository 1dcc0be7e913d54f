"""The manual builds, its reference pages show what the code holds, and it looks right in
a browser: the front page and the settings page, screenshotted in headless Chromium
(Debian's `chromium` and `chromium-driver`, as the admin's browser tests use).

The screenshots go under the test's tmp folder, and into $LATERITE_DOCS_SHOTS when set.
`nox -s docs` is the strict build (-W -n); this one builds to look at the result."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.admin.browser import CHROMIUM_FLAGS, _browser_paths
from tests.docs.reference import DOCS, extension

pytestmark = pytest.mark.slow  # a Sphinx build: about 10 s


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manual built as HTML, once for the module."""
    out = tmp_path_factory.mktemp("docs") / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "--keep-going", "-q", "-b", "html",
         str(DOCS), str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-5000:]
    return out


def test_the_reference_pages_show_every_item_as_a_linkable_row(site: Path) -> None:
    reference = extension()
    pages = {name: (site / "reference" / f"{name}.html").read_text()
             for name in ("settings", "checks", "commands", "metrics", "signals",
                          "exceptions", "api")}
    for setting in reference.settings():
        anchor = "setting-" + setting.name.lower().replace("_", "-")
        assert f'id="{anchor}"' in pages["settings"], setting.name
    for check in reference.checks():
        assert f'id="check-{check.id.replace(".", "-").lower()}"' in pages["checks"], check.id
    for command in reference.commands():
        assert f'id="command-{command.name.replace("_", "-")}"' in pages["commands"]
        for option in command.options:
            assert all(flag in pages["commands"] for flag in option.flags), option
    for metric in reference.metrics():
        assert metric.name in pages["metrics"], metric.name
    for name in ("job_started", "job_succeeded", "job_retrying", "job_failed"):
        assert f'id="laterite_django.signals.{name}"' in pages["signals"]
    assert 'id="laterite_django.exceptions.Retry"' in pages["exceptions"]
    assert 'id="laterite_django.job"' in pages["api"]
    assert 'id="laterite_django.tasks.backend.LateriteBackend"' in pages["api"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (skipped without it, failing in CI)."""
    chromium, driver = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="laterite-docs-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield chrome
    finally:
        chrome.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _screenshot(browser: Any, path: Path) -> None:
    """Save the whole page, beyond the window, as PNG at `path`, and into
    $LATERITE_DOCS_SHOTS when it names a folder."""
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000),
                 "scale": 1},
    })
    data = base64.b64decode(shot["data"])
    assert data.startswith(b"\x89PNG") and len(data) > 10_000
    path.write_bytes(data)
    if os.environ.get("LATERITE_DOCS_SHOTS"):
        shots = Path(os.environ["LATERITE_DOCS_SHOTS"])
        shots.mkdir(parents=True, exist_ok=True)
        (shots / path.name).write_bytes(data)


def test_the_front_page_and_the_settings_page_in_a_browser(site: Path, browser: Any,
                                                            tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get((site / "index.html").as_uri())
    assert browser.title.startswith("laterite_django")
    headings = browser.find_element(By.CSS_SELECTOR, "article h1").text
    assert headings.startswith("laterite_django")
    sidebar = browser.find_element(By.CSS_SELECTOR, ".sidebar-tree").text
    for section in ("Tutorial", "How-to guides", "Reference", "Explanation"):
        assert section in sidebar
    _screenshot(browser, tmp_path / "docs-index.png")

    browser.get((site / "reference" / "settings.html").as_uri())
    assert browser.title.startswith("Settings")
    row = browser.find_element(By.ID, "setting-laterite-queue-retry-after")
    cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
    assert cells[0] == "LATERITE_QUEUE_RETRY_AFTER" and cells[1] == "90", cells
    assert cells[3] == "laterite.E007", cells
    assert row.is_displayed() and row.size["height"] > 10
    _screenshot(browser, tmp_path / "docs-settings.png")
