"""The package as users get it: an sdist and a wheel that pass `twine check` and hold
the templates and migrations, and the wheel installed alone in a new virtualenv runs
the example project's demo (the README's first command) on SQLite.

LATERITE_DIST names a directory holding the sdist and wheel to check (nox's
`package` session builds them there); without it they are built here with
`python -m build`. Without `build` or `twine` installed the tests are skipped
locally and fail in CI (CI=true).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import django
import pytest

import laterite_django
from tests.conftest import ROOT

VERSION = laterite_django.__version__
PACKAGE = ROOT / "laterite_django"


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        reason = f"needs {module} (pip install -e '.[test]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must have it, so this is not skipped")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory with the sdist and the wheel."""
    given = os.environ.get("LATERITE_DIST")
    if given:
        return Path(given)
    _needs("build")
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("laterite_django-*.whl")
    return found


@pytest.fixture(scope="module")
def sdist(dist: Path) -> Path:
    (found,) = dist.glob("laterite_django-*.tar.gz")
    return found


def package_files() -> set[str]:
    """Every file of the package in this checkout, as a path from the project root."""
    files = {
        path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert any("/templates/" in f for f in files) and any("/migrations/" in f for f in files)
    return files


def test_the_sdist_and_wheel_are_of_this_version(wheel, sdist):
    assert wheel.name == f"laterite_django-{VERSION}-py3-none-any.whl"
    assert sdist.name == f"laterite_django-{VERSION}.tar.gz"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"laterite_django-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata
    assert "\nName: laterite-django\n" in metadata and "\nLicense-Expression: MIT\n" in metadata
    assert "\nrequires-dist: django>=5.2\n" in metadata.lower()


def test_the_long_description_has_no_link_or_image_that_breaks_off_the_repository(wheel):
    """The README is the package index page's text, where a relative link or image (to
    docs/, example_project/, ...) leads nowhere; no public repository exists to point
    them at, so the files are named instead, and said to be in a clone."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"laterite_django-{VERSION}.dist-info/METADATA").decode()
    description = metadata.split("\n\n", 1)[1]
    assert "\nDescription-Content-Type: text/markdown\n" in metadata
    assert re.findall(r"\]\((?!https?://|#)[^)]*\)", description) == []
    assert "Background jobs for Django" in description
    assert "`docs/howto/deploy.md`" in description and "in a clone of its repository" in description


def test_twine_check_passes(dist):
    _needs("twine")
    files = [str(path) for path in sorted(dist.iterdir())]
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_the_wheel_holds_every_file_of_the_package(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert package_files() <= names, sorted(package_files() - names)
    for needed in ("laterite_django/py.typed",
                   "laterite_django/migrations/0005_retried_from.py",
                   "laterite_django/templates/laterite_django/admin/failedjob_change_form.html"):
        assert needed in names
    assert not [name for name in names if name.startswith(("tests/", "example_project/"))]


def test_the_sdist_holds_the_package_readme_changelog_and_license(sdist):
    top = f"laterite_django-{VERSION}/"
    with tarfile.open(sdist) as archive:
        names = {name.removeprefix(top) for name in archive.getnames()}
    assert package_files() <= names, sorted(package_files() - names)
    assert {"README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml"} <= names


def test_the_demo_runs_from_the_wheel_in_a_new_virtualenv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(wheel), f"Django=={django.__version__}"],
        capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # The example away from the checkout, so nothing can import the checkout's package.
    example = tmp_path / "example_project"
    shutil.copytree(ROOT / "example_project", example,
                    ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3*"))
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")}
    env.update(EXAMPLE_STORE="sqlite", EXAMPLE_LOG_LEVEL="WARNING", PYTHONNOUSERSITE="1")

    def manage(*args: str) -> str:
        ran = subprocess.run([str(python), str(example / "manage.py"), *args], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        return ran.stdout

    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    out = manage("demo")
    assert f"laterite-django {VERSION} from {site}/laterite_django," in out, out
    assert "receipt_sent=True stock_synced=True paid=True" in out, out
    assert "Fail: card declined for order 2" in out, out
    # The admin's templates load from the wheel too.
    origin = manage("shell", "-c", "from django.template.loader import get_template; print("
                    "get_template('laterite_django/admin/job_change_form.html').origin.name)")
    assert origin.strip().splitlines()[-1] == (
        f"{site}/laterite_django/templates/laterite_django/admin/job_change_form.html")
