"""The manual's reference (docs/reference/, made by docs/_ext/laterite_reference.py) holds
every setting, system check id, command argument and metric of the package, and nothing
else: each collector is compared with a scan of the code that does not go through it,
and with the README and the manual's own pages where they name one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.core.management import load_command_class

from tests.conftest import ROOT
from tests.docs.reference import DOCS, PACKAGE, extension, package_sources

CHECK_ID = re.compile(r"\blaterite\.[EW]\d{3}\b")
SETTING = re.compile(r"\bLATERITE_QUEUE_[A-Z][A-Z_]*[A-Z]\b")


def _without_registry(source: str) -> str:
    """checks.py without its CHECK_IDS table: the ids the checks report, not those listed."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and "CHECK_IDS" in ast.unparse(
                node.target if isinstance(node, ast.AnnAssign) else node.targets[0]):
            lines = source.splitlines()
            return "\n".join(lines[:node.lineno - 1] + lines[node.end_lineno:])
    raise AssertionError("checks.py has no CHECK_IDS")


def _check_ids_in_code() -> set[str]:
    """The ids the package's checks report: those written out, and those made from a
    number (conf's Problem codes, the schedules' codes)."""
    found: set[str] = set()
    for path, source in package_sources().items():
        if path == PACKAGE / "checks.py":
            source = _without_registry(source)
        found |= set(CHECK_ID.findall(source))
        if path == PACKAGE / "conf.py":
            codes = re.findall(r"Problem\(\s*(\d+)", source)
        elif path == PACKAGE / "schedules" / "definition.py":
            codes = re.findall(r"(?:\bbad|ScheduleProblem)\(\s*(\d+)", source)
        elif path == PACKAGE / "schedules" / "tasks.py":
            codes = re.findall(r"return (\d+), ", source)
        else:
            codes = []
        found |= {f"laterite.E{int(code):03d}" for code in codes}
    return found


def test_every_check_id_the_code_reports_is_in_the_reference_and_no_other() -> None:
    listed = {check.id for check in extension().checks()}
    in_code = _check_ids_in_code()
    assert in_code - listed == set(), "reported by the code, missing from CHECK_IDS"
    assert listed - in_code == set(), "in CHECK_IDS, reported by no check"
    assert len(listed) >= 30


def test_a_check_ids_level_is_its_letter() -> None:
    for check in extension().checks():
        assert check.level == {"E": "Error", "W": "Warning"}[check.id[9]], check
        assert check.summary.endswith("."), check


def test_each_settings_check_id_is_a_listed_check() -> None:
    listed = {check.id for check in extension().checks()}
    for setting in extension().settings():
        assert setting.check in listed, setting


def test_every_setting_the_package_names_is_in_the_reference_and_each_is_read() -> None:
    listed = {setting.name for setting in extension().settings()}
    named = set().union(*(SETTING.findall(source) for source in package_sources().values()))
    assert named - listed == set(), "named by the package, missing from the reference"
    readers = "\n".join(source for path, source in package_sources().items()
                        if path != PACKAGE / "conf.py")
    for name in listed:
        short = name.removeprefix("LATERITE_QUEUE_")
        read = re.search(rf'settings\.{short}\b|raw\("{short}"\)|"{name}"', readers)
        assert read, f"{name} is in the reference but no code outside conf.py reads it"


def test_every_setting_has_a_description_and_a_default() -> None:
    for setting in extension().settings():
        assert len(setting.description) > 30 and setting.description.endswith("."), setting


def test_the_readme_and_the_manual_name_only_what_the_reference_holds() -> None:
    checks = {check.id for check in extension().checks()}
    settings = {setting.name for setting in extension().settings()}
    metrics = {metric.name for metric in extension().metrics()}
    metric = re.compile(r"\blaterite_(?:jobs|job|queue|store)_[a-z_]*(?:total|seconds|jobs"
                        r"|paused|up)\b")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert set(CHECK_ID.findall(text)) <= checks, page
        assert set(SETTING.findall(text)) <= settings, page
        assert set(metric.findall(text)) <= metrics, page


def _flags_in_help(name: str) -> set[str]:
    """The flags `manage.py NAME --help` prints (the public view of the parser)."""
    text = load_command_class("laterite_django", name).create_parser(
        "manage.py", name).format_help()
    flags = set()
    for line in text.splitlines():
        # An option's line: "  -x VALUE, --long VALUE   its help", the help after 2 spaces.
        if re.match(r"  -", line):
            for item in re.split(r"\s{2,}", line.strip())[0].split(", "):
                flags.add(item.split(" ")[0])
    return flags


def test_every_command_and_every_flag_is_in_the_reference_and_no_other() -> None:
    commands = {command.name: command for command in extension().commands()}
    files = {path.stem for path in (PACKAGE / "management" / "commands").glob("queue_*.py")}
    assert set(commands) == files
    django_own = _flags_in_help("queue_status") - {
        flag for option in commands["queue_status"].options for flag in option.flags}
    assert {"--verbosity", "--settings", "--help"} <= django_own
    for name, command in commands.items():
        listed = {flag for option in command.options for flag in option.flags
                  if flag.startswith("-")}
        assert _flags_in_help(name) - django_own == listed, name
        assert all(option.help for option in command.options), name
    assert "--metrics-port" in {f for o in commands["queue_work"].options for f in o.flags}


def test_every_metric_the_collectors_declare_is_in_the_reference() -> None:
    source = (PACKAGE / "metrics" / "collector.py").read_text()
    declared = re.findall(r'(Counter|Gauge|Histogram)MetricFamily\(\s*"(laterite_\w+)"', source)
    expected = {name + ("_total" if kind == "Counter" else "") for kind, name in declared}
    listed = {metric.name: metric for metric in extension().metrics()}
    assert set(listed) == expected
    assert listed["laterite_jobs_total"].labels == ("queue", "job", "outcome")
    assert listed["laterite_queue_jobs"].type == "gauge"


def test_every_signal_and_exception_has_its_text_for_autodoc() -> None:
    from sphinx.pycode import ModuleAnalyzer

    from laterite_django import exceptions, signals

    documented = ModuleAnalyzer.for_module("laterite_django.signals").find_attr_docs()
    for name in signals.__all__:
        assert ("", name) in documented, f"signals.{name} has no #: comment"
    for name in exceptions.__all__:
        assert getattr(exceptions, name).__doc__, f"exceptions.{name} has no docstring"


def test_each_reference_page_uses_its_directive() -> None:
    pages = {path.stem: path.read_text() for path in (DOCS / "reference").glob("*.md")}
    for page, shown in [("settings", "{laterite-settings}"), ("checks", "{laterite-checks}"),
                        ("commands", "{laterite-commands}"), ("metrics", "{laterite-metrics}"),
                        ("signals", "automodule:: laterite_django.signals"),
                        ("exceptions", "automodule:: laterite_django.exceptions")]:
        assert shown in pages[page], page
    toctree = pages["index"]
    assert all(page in toctree for page in pages if page != "index")


def test_docstring_lines_become_rest_that_keeps_their_text() -> None:
    line = extension().plain_docstring_line
    assert line('cron ("0 3 * * *") or `every`s') == r'cron ("0 3 \* \* \*") or ``every``\ s'
    assert line("`a|b` and name_") == r"``a|b`` and name\_"
    assert Path(line.__code__.co_filename).parent == DOCS / "_ext"
