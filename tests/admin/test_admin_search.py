"""The admin's search box: case-insensitive, literal, and on PostgreSQL an ASCII term
folded without the locale (admin/search.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.admin.test_admin import FAILED, JOBS, ids, make_failed, make_job

pytestmark = pytest.mark.django_db


def test_a_term_matches_whatever_the_case_of_its_ascii_letters(admin_client):
    broken = make_failed(error="ValueError: Broken pipe 7 (-42)\nTraceback ...")
    other = make_failed(error="KeyError: 'user'\n", name="tests.Mailer")
    job = make_job(payload={"args": ["Alpha"], "kwargs": {}})
    make_job(payload={"args": ["beta"], "kwargs": {}})
    assert ids(admin_client.get(FAILED, {"q": "broken PIPE"})) == {broken.pk}
    assert ids(admin_client.get(FAILED, {"q": "MAILER"})) == {other.pk}
    assert ids(admin_client.get(JOBS, {"q": "aLpHa"})) == {job.pk}
    assert ids(admin_client.get(FAILED, {"q": '"pipe 7"'})) == {broken.pk}  # a phrase
    assert ids(admin_client.get(FAILED, {"q": '"pipe  7"'})) == set()
    assert ids(admin_client.get(FAILED, {"q": "(-42)"})) == {broken.pk}  # no letters


def test_like_wildcards_in_a_term_are_literal(admin_client):
    percent = make_failed(error="OSError: disk 100% full\n")
    make_failed(error="OSError: disk 1000 full\n")
    underscore = make_failed(error="NameError: name 'a_b' is not defined\n")
    make_failed(error="NameError: name 'axb' is not defined\n")
    assert ids(admin_client.get(FAILED, {"q": "100%"})) == {percent.pk}
    assert ids(admin_client.get(FAILED, {"q": "a_b"})) == {underscore.pk}


def test_a_term_with_letters_outside_ascii_is_folded_as_the_database_folds_it(admin_client):
    accented = make_failed(error="ValueError: échec de la requête\n")
    make_failed(error="ValueError: echec de la requete\n")
    assert ids(admin_client.get(FAILED, {"q": "échec"})) == {accented.pk}
    assert ids(admin_client.get(FAILED, {"q": "REQUÊTE"})) == (
        # PostgreSQL folds it through the locale; SQLite's LIKE folds ASCII letters only.
        {accented.pk} if connection.vendor == "postgresql" else set())


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_on_postgresql_an_ascii_term_is_folded_without_the_locale(admin_client):
    make_failed(error="ValueError: broken\n")
    with CaptureQueriesContext(connection) as captured:
        assert len(ids(admin_client.get(FAILED, {"q": "Broken"}))) == 1
    searched = [q["sql"] for q in captured if "LIKE" in q["sql"]]
    assert searched and all('COLLATE "C"' in sql and "'%BROKEN%'" in sql for sql in searched)
    with CaptureQueriesContext(connection) as captured:
        assert ids(admin_client.get(FAILED, {"q": "Brökén"})) == set()
    searched = [q["sql"] for q in captured if "LIKE" in q["sql"]]
    assert searched and not any('COLLATE "C"' in sql for sql in searched)
    with CaptureQueriesContext(connection) as captured:
        assert ids(admin_client.get(FAILED, {"q": "2026-12"})) == set()
    searched = [q["sql"] for q in captured if "LIKE" in q["sql"]]
    assert searched and not any("UPPER" in sql for sql in searched)
