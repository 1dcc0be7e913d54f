"""The bench's scale scenarios: option parsing and the report's tables (no store, no timing)."""

import pytest

from bench import report, run
from bench.systems import SCENARIO_ROWS


def test_scale_runs_only_the_rows_that_take_part():
    args = run.parse_args(["--scenarios", "scale", "--quick"])
    assert args.scenarios == ["churn", "backlog", "idle"]
    assert set(args.names) == {r for rows in SCENARIO_ROWS.values() for r in rows}
    assert (args.churn_b, args.churn_run_b) == (100_000, 20_000)
    assert args.backlog_sizes == [1_000, 10_000, 100_000]
    assert args.system_timeout == 7200


def test_default_is_the_table_alone():
    args = run.parse_args([])
    assert args.scenarios == ["figures"]
    assert args.backlog_sizes == [10_000, 100_000, 1_000_000]
    assert args.system_timeout == 900
    assert "rq" in args.names


# A run's meta as bench/run.py writes it, for reports of no rows.
_META = {"date": "2026-01-01 00:00 UTC", "nproc": 2, "cpu": "x", "memory": "1 GiB",
         "os": "Linux", "load_start": "0", "load_end": "0", "python": "3.11",
         "n": 10, "repeat": 3, "latency_samples": 5, "command": "python bench/run.py"}


def _fig(v):
    return {"median": v, "values": [v], "unit": "jobs/s"}


def test_report_gives_the_ratios():
    churn = {
        "b_cleared": 1_000_000,
        "b_ran": 1_000_000,
        "procs": 2,
        "ran_s": 500.0,
        "fresh": {**_fig(1000.0), "dead_tuples": 0},
        "cleared": {**_fig(250.0), "dead_tuples": 1_000_000},
        "ran": {**_fig(500.0), "dead_tuples": 999_000},
    }
    backlog = {
        "n": 2000,
        "rows": [
            {"kind": "waiting", "size": 10_000, "push_one": 100.0, "drain": 800.0, "p50": 2.0},
            {"kind": "waiting", "size": 1_000_000, "push_one": 90.0, "drain": 200.0, "p50": 3.0},
            {"kind": "delayed", "size": 1_000_000, "push_one": 95.0, "drain": 700.0, "p50": 2.5},
        ],
    }
    idle = {
        "processes": 8,
        "tree_processes": 9,
        "seconds": 30.0,
        "cpu_pct": 0.5,
        "pg": {"xacts": 30, "table_scans": 60, "seconds": 30.0, "querying_sessions": 0,
               "sessions": 17},
        "redis_commands": {"blpop": 60},
    }
    results = {
        "laterite_pg": {"churn": churn, "backlog": backlog, "idle": idle, "errors": []},
    }
    meta = {
        "date": "d", "nproc": 2, "cpu": "c", "memory": "m", "os": "o", "load_start": "0",
        "load_end": "0", "python": "3", "n": 2000, "repeat": 3, "latency_samples": 100,
        "command": "python bench/run.py --scenarios scale", "png_name": "x.png",
    }  # fmt: skip
    text = report.markdown({"meta": meta, "results": results})
    assert "## Figures" not in text  # no table figures in this run
    assert "(a) after 10^6 jobs were pushed in bulk and cleared" in text
    assert "| **0.25** |" in text and "| **0.50** |" in text  # cleared, ran / fresh
    assert "| 0 / 1,000,000 / 999,000 | 2,000 |" in text
    assert "| 10^6 / 10^4 | **0.25** | 0.90 | 1.50 |" in text
    assert "10^6 delayed" in text
    assert "| 8 (9) | 0.50 | 60 | 120 | 0 of 17 | 120 (blpop 120) |" in text
    assert "![scale](x.png)" in text


def test_merge_keeps_what_a_run_did_not_measure():
    old = {"drain_1": {"median": 5.0}, "churn": {"a": 1}, "idle": {"b": 2}, "notes": ["x"]}
    new = {"churn": {"a": 3}, "notes": ["y"], "errors": []}
    out = run.merge_result(old, new, ["churn"])
    assert out["drain_1"] == {"median": 5.0} and out["idle"] == {"b": 2}
    assert out["churn"] == {"a": 3} and out["notes"] == ["x", "y"]
    table = run.merge_result(old, {"drain_1": {"median": 6.0}}, ["figures"])
    assert table["drain_1"] == {"median": 6.0} and table["churn"] == {"a": 1}


def test_flow_is_asked_for_by_name_and_reported_as_ratios():
    args = run.parse_args(["--scenarios", "flow", "--quick"])
    assert args.scenarios == ["flow"]
    assert set(args.names) == {"laterite_pg", "laterite_redis", "laterite_sqlite"}
    assert args.system_timeout == 900
    assert "flow" not in run.parse_args(["--scenarios", "scale"]).scenarios
    flow = {"unlimited": _fig(4000.0), "keyed": _fig(3000.0), "queue": _fig(2000.0),
            "processes": 2, "keys": 100, "concurrency": 10, "batch": "20 (default)"}
    text = "\n".join(report.scenario_sections({"laterite_pg": {"flow": flow}}, {}))
    assert "| 4,000 | 3,000 (0.75x) | 2,000 (0.50x) |" in text


def test_variants_are_reported_against_their_base_rows():
    def row(rate):
        return {f"drain_{n}": _fig(rate * n) for n in (1, 2, 4)} | {"errors": []}

    results = {"laterite_pg": row(1000.0), "laterite_pg_in_batch": row(850.0),
               "laterite_redis": row(2000.0), "laterite_redis_metrics": row(1900.0)}
    meta = {
        "date": "d", "nproc": 2, "cpu": "c", "memory": "m", "os": "o", "load_start": "0",
        "load_end": "0", "python": "3", "n": 2000, "repeat": 3, "latency_samples": 100,
        "command": "python bench/run.py", "png_name": "x.png",
    }  # fmt: skip
    text = report.markdown({"meta": meta, "results": results})
    section = text.split("## Variants against their base rows")[1]
    assert "| PostgreSQL | in one batch / plain | laterite_pg_in_batch / laterite_pg |" \
        " 0.85 (850 / 1,000) | 0.85 (1,700 / 2,000) | 0.85 (3,400 / 4,000) |" in section
    assert "| Redis | metrics on / off | laterite_redis_metrics / laterite_redis | 0.95" in section


def test_alternating_rounds_pool_each_scenario_figure():
    def round_(unlimited, queue):
        return {"flow": {"unlimited": _fig(unlimited), "queue": _fig(queue), "processes": 2},
                "push_one": _fig(unlimited), "load": [1.0, 1.0], "errors": [], "notes": []}

    combined = run.combine([round_(100, 50), round_(300, 90), round_(200, 70)])
    assert combined["flow"]["unlimited"]["values"] == [100, 300, 200]
    assert combined["flow"]["unlimited"]["median"] == 200
    assert combined["flow"]["queue"]["median"] == 70
    assert combined["flow"]["processes"] == 2
    assert combined["push_one"]["median"] == 200


def test_a_report_says_its_rows_ran_in_alternating_rounds():
    assert run.parse_args(["--only", "huey,laterite_redis", "--alternate"]).alternate
    assert run.parse_args(["--only", "huey,laterite_redis"]).alternate  # the table's default
    assert not run.parse_args(["--only", "huey,laterite_redis", "--sequential"]).alternate
    assert not run.parse_args(["--scenarios", "churn"]).alternate
    assert run.parse_args(["--scenarios", "churn", "--alternate"]).alternate
    with pytest.raises(SystemExit):
        run.parse_args(["--alternate", "--sequential"])
    meta = _META
    one_by_one = report.markdown({"meta": meta, "results": {}})
    alternating = report.markdown({"meta": {**meta, "alternate": True}, "results": {}})
    assert "one after the other" in one_by_one and "alternating" not in one_by_one
    assert "in alternating rounds of one repetition each (a b c, c b a, ...)" in alternating


def test_a_report_says_how_long_each_push_one_repetition_pushed():
    meta = _META
    # A report of a run made before push one was timed over a minimum says nothing of it.
    assert "of pushing" not in report.markdown({"meta": meta, "results": {}})
    timed = report.markdown({"meta": {**meta, "push_seconds": 1.0}, "results": {}})
    assert "push one: at least N pushes and 1 s of pushing per repetition" in timed
