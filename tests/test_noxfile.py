"""noxfile.py's scratch folder: two runs on one machine can keep their legs' SQLite
files and logs apart (LATERITE_NOX_TMP)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("nox")


def leg_folder(**env: str) -> Path:
    """Where noxfile.py puts the Django 5.2 on SQLite leg's files under `env`; read in a
    subprocess, as importing the noxfile sets nox's options (and PYENV_VERSION)."""
    environ = {k: v for k, v in os.environ.items() if k != "LATERITE_NOX_TMP"}
    found = subprocess.run(
        [sys.executable, "-c",
         "import noxfile; print(noxfile._leg_folder(noxfile.LEGS[0].id))"],
        cwd=ROOT, env={**environ, **env}, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    return Path(found.stdout.strip())


def test_the_legs_folder_comes_from_laterite_nox_tmp(tmp_path: Path):
    assert leg_folder(LATERITE_NOX_TMP=str(tmp_path)) == tmp_path / "django5.2-sqlite"


def test_the_legs_folder_defaults_to_tmp_laterite_nox():
    assert leg_folder() == Path("/tmp/laterite-nox/django5.2-sqlite")
