"""Sphinx directives that render laterite_django's reference from the code itself.

Each collector (`settings()`, `checks()`, `commands()`, `metrics()`) reads one source
of the package and returns plain values; each directive renders one collector as
tables, so a page can never say what the code does not do. tests/docs reads the same
collectors and compares them with an independent scan of the package.

The directives also register every item as an object of the `std` domain, so the
manual's pages link to one by name: {setting}`LATERITE_QUEUE_RETRY_AFTER`,
{check}`laterite.E001`, {command}`queue_work`, {metric}`laterite_jobs_total`.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

__all__ = [
    "Check", "Command", "Metric", "Option", "Setting", "checks", "commands", "metrics",
    "settings", "setup",
]

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "laterite_django" / "management" / "commands"


# -- collectors ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One LATERITE_QUEUE_* setting: its full name, default, description and check id."""

    name: str
    default: Any
    description: str
    check: str | None


def settings() -> list[Setting]:
    """Every setting of laterite_django.conf, in the order DEFAULTS declares them.

    The check id is the code of the Problem its rule reports for a value no rule
    accepts (a bare object()), so it is the rule's own, not one written here.
    """
    from laterite_django import conf

    found = []
    for name, default in conf.DEFAULTS.items():
        problem = conf.RULES[name](object())
        check = None if problem is None else f"laterite.E{problem.code:03d}"
        found.append(Setting(f"LATERITE_QUEUE_{name}", default, conf.DESCRIPTIONS[name], check))
    return found


@dataclass(frozen=True)
class Check:
    """One system check id, its level (Error or Warning) and what it reports."""

    id: str
    level: str
    summary: str


def checks() -> list[Check]:
    """Every system check id of laterite_django.checks.CHECK_IDS, errors first."""
    from laterite_django.checks import CHECK_IDS

    return sorted((Check(id, level, summary) for id, (level, summary) in CHECK_IDS.items()),
                  key=lambda c: (c.id[9], int(c.id[10:])))


@dataclass(frozen=True)
class Option:
    """One argument of a command: its flags (or its name), value, default and help."""

    flags: tuple[str, ...]
    value: str | None
    default: Any
    help: str


@dataclass(frozen=True)
class Command:
    """One `queue_*` management command: its name, help and own arguments."""

    name: str
    help: str
    options: tuple[Option, ...]


def _base_dests() -> set[str]:
    """The arguments every Django command has (--verbosity, --settings, ...)."""
    from django.core.management.base import BaseCommand

    parser = BaseCommand().create_parser("manage.py", "command")
    return {action.dest for action in parser._actions}


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help as `--help` prints it (%(default)s and the like filled in)."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % params


def _value(action: argparse.Action) -> str | None:
    """What follows the flag (its metavar or choices), or None for a flag alone."""
    if action.nargs == 0:
        return None
    if action.metavar is not None:
        metavar = action.metavar
        return " ".join(metavar) if isinstance(metavar, tuple) else str(metavar)
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    name = action.dest if not action.option_strings else action.dest.upper()
    return f"{name} ..." if action.nargs in ("*", "+") else name


def commands() -> list[Command]:
    """Every `queue_*` command in laterite_django/management/commands, with each argument
    its parser declares beyond those every Django command has."""
    from django.core.management import load_command_class

    base = _base_dests()
    found = []
    for path in sorted(COMMANDS_DIR.glob("queue_*.py")):
        name = path.stem
        command = load_command_class("laterite_django", name)
        parser = command.create_parser("manage.py", name)
        options = tuple(
            Option(
                tuple(action.option_strings) or (action.dest,),
                _value(action),
                None if action.default in (None, False, argparse.SUPPRESS) else action.default,
                _help(action, parser.prog),
            )
            for action in parser._actions
            if action.dest not in base and action.help is not argparse.SUPPRESS
        )
        found.append(Command(name, str(command.help), options))
    return found


@dataclass(frozen=True)
class Metric:
    """One Prometheus metric family: its exposed name, type, labels and help."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str


class _EmptyStore:
    """A store with no jobs and no paused queue, for QueueCollector to read at build time."""

    def counts(self) -> dict:
        return {}

    def oldest_waiting(self) -> dict[str, datetime]:
        return {}

    def paused_queues(self) -> set[str]:
        return set()

    def close(self) -> None:
        pass


def _families() -> Iterator[Any]:
    from laterite_django.metrics.collector import JobsCollector, QueueCollector
    from laterite_django.metrics.totals import Totals

    yield from JobsCollector(Totals()).collect()
    yield from QueueCollector(store=_EmptyStore).collect()  # type: ignore[arg-type]


def metrics() -> list[Metric]:
    """Every metric family laterite's collectors yield (a worker's and the web view's),
    read from prometheus-client's own objects: a counter is exposed with `_total`."""
    return [
        Metric(family.name + ("_total" if family.type == "counter" else ""), family.type,
               tuple(family._labelnames), family.documentation)
        for family in _families()
    ]


def label_values() -> dict[str, tuple[str, ...]]:
    """The values a label takes where the code fixes them: outcome and state."""
    from laterite_django.metrics.collector import STATES
    from laterite_django.worker.tally import OUTCOMES

    return {"outcome": tuple(OUTCOMES.values()), "state": tuple(STATES)}


# -- rendering ----------------------------------------------------------------------------


def _inline(text: str) -> list[nodes.Node]:
    """Text with its `code spans` as literals (the code's docstrings' convention)."""
    parts: list[nodes.Node] = []
    for i, piece in enumerate(re.split(r"`([^`]+)`", text)):
        if piece:
            parts.append(nodes.literal(piece, piece) if i % 2 else nodes.Text(piece))
    return parts


def _cell(*content: nodes.Node | str) -> nodes.entry:
    paragraph = nodes.paragraph()
    for item in content:
        paragraph += nodes.Text(item) if isinstance(item, str) else item
    return nodes.entry("", paragraph)


def _code(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def _table(headers: Iterable[str], rows: Iterable[tuple[list[str], list[nodes.entry]]],
           widths: Iterable[int], classes: str) -> nodes.table:
    """A table; each row is (its ids, its cells), so a row can be linked to."""
    headers = list(headers)
    group = nodes.tgroup(cols=len(headers))
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += nodes.row("", *(_cell(h) for h in headers))
    group += head
    body = nodes.tbody()
    for ids, cells in rows:
        row = nodes.row("", *cells)
        row["ids"].extend(ids)
        body += row
    group += body
    table = nodes.table("", group, classes=["laterite-reference", classes])
    return table


class _ReferenceDirective(SphinxDirective):
    """A directive with no arguments that renders one collector, noting each item."""

    objtype: ClassVar[str] = ""

    def note(self, name: str) -> str:
        """Register `name` in the std domain (for its role) and return its anchor id."""
        node_id = nodes.make_id(f"{self.objtype}-{name}")
        std = self.env.domains.standard_domain if hasattr(self.env, "domains") else \
            self.env.get_domain("std")
        std.note_object(self.objtype, name, node_id, location=(self.env.docname, self.lineno))
        return node_id


class SettingsDirective(_ReferenceDirective):
    """`laterite-settings`: every setting, its default and what it is."""

    objtype = "setting"

    def run(self) -> list[nodes.Node]:
        rows = [
            ([self.note(s.name)], [
                _cell(_code(s.name)),
                _cell(_code(repr(s.default))),
                _cell(*_inline(s.description)),
                _cell(_code(s.check) if s.check else "")])
            for s in settings()
        ]
        return [_table(["setting", "default", "what it is", "check"], rows, [22, 10, 56, 12],
                       "laterite-settings")]


class ChecksDirective(_ReferenceDirective):
    """`laterite-checks`: every system check id, its level and what it reports."""

    objtype = "check"

    def run(self) -> list[nodes.Node]:
        rows = [([self.note(c.id)], [_cell(_code(c.id)), _cell(c.level),
                                     _cell(*_inline(c.summary))])
                for c in checks()]
        return [_table(["id", "level", "reported when"], rows, [16, 10, 74],
                       "laterite-checks")]


class CommandsDirective(_ReferenceDirective):
    """`laterite-commands`: a section per `queue_*` command, a table of its arguments."""

    objtype = "command"

    def run(self) -> list[nodes.Node]:
        sections: list[nodes.Node] = []
        for command in commands():
            section = nodes.section(ids=[self.note(command.name)], names=[command.name])
            section += nodes.title("", "", _code(command.name))
            section += nodes.paragraph("", "", *_inline(command.help))
            if command.options:
                rows = [
                    ([], [
                        _cell(*_flags(option)),
                        _cell("" if option.default is None else _code(repr(option.default))),
                        _cell(*_inline(option.help))])
                    for option in command.options
                ]
                section += _table(["argument", "default", "what it does"], rows, [28, 12, 60],
                                  "laterite-command")
            else:
                section += nodes.paragraph("", "No arguments beyond Django's own.")
            sections.append(section)
        return sections


def _flags(option: Option) -> list[nodes.Node]:
    parts: list[nodes.Node] = []
    for i, flag in enumerate(option.flags):
        if i:
            parts.append(nodes.Text(", "))
        parts.append(_code(flag if option.value is None or not flag.startswith("-")
                           else f"{flag} {option.value}"))
    return parts


class MetricsDirective(_ReferenceDirective):
    """`laterite-metrics`: every metric family, its type, labels and help."""

    objtype = "metric"

    def run(self) -> list[nodes.Node]:
        values = label_values()
        rows = []
        for metric in metrics():
            labels: list[nodes.Node] = []
            for label in metric.labels:
                if labels:
                    labels.append(nodes.Text(", "))
                labels.append(_code(label))
                if label in values:
                    labels.append(nodes.Text(f" ({', '.join(values[label])})"))
            rows.append(([self.note(metric.name)], [
                _cell(_code(metric.name)), _cell(metric.type), _cell(*labels),
                _cell(*_inline(metric.help))]))
        return [_table(["metric", "type", "labels", "what it measures"], rows, [30, 10, 25, 35],
                       "laterite-metrics")]


_CODE_SPAN = re.compile(r"`([^`]+)`")
_REST_SPECIAL = re.compile(r"([\\*|])|(?<=\w)(_)(?!\w)")


def plain_docstring_line(line: str) -> str:
    """One docstring line as reST: the package's docstrings are plain text whose
    `code spans` are in single backticks, so those become literals and the rest is
    escaped (a `*` or `|` is no markup there)."""
    out, end = [], 0
    for match in _CODE_SPAN.finditer(line):
        out.append(_REST_SPECIAL.sub(r"\\\1\2", line[end:match.start()]))
        before = line[match.start() - 1] if match.start() else " "
        after = line[match.end()] if match.end() < len(line) else " "
        # Inline markup must stand apart from a word: an escaped space joins it.
        out.append(("\\ " if before.isalnum() else "") + f"``{match[1]}``"
                   + ("\\ " if after.isalnum() else ""))
        end = match.end()
    out.append(_REST_SPECIAL.sub(r"\\\1\2", line[end:]))
    return "".join(out)


def _plain_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                     lines: list[str]) -> None:
    lines[:] = [plain_docstring_line(line) for line in lines]


class _SectionWithoutPagesYet(logging.Filter):
    """Drop Sphinx's warning for a section's `:glob:` toctree that matches no page yet.

    Each section (tutorial/, howto/, ...) lists its pages by glob, so adding a page is
    adding a file; a section still empty is not a broken build. Sphinx gives that
    warning no type, so `suppress_warnings` cannot name it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "toctree glob pattern" not in str(record.msg)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the reference directives and the object types they note."""
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(_SectionWithoutPagesYet())
    for objtype, label in (("setting", "setting"), ("check", "system check"),
                           ("command", "management command"), ("metric", "metric")):
        app.add_object_type(objtype, objtype, objname=label)
    app.connect("autodoc-process-docstring", _plain_docstring)
    app.add_directive("laterite-settings", SettingsDirective)
    app.add_directive("laterite-checks", ChecksDirective)
    app.add_directive("laterite-commands", CommandsDirective)
    app.add_directive("laterite-metrics", MetricsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
