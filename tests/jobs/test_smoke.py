from laterite_django.models import FailedJob
from tests.testapp import jobs
from tests.testapp.models import Record


def test_push_then_worker_runs(store, workers):
    pushed = jobs.record.push("hello")
    assert pushed.status == "queued" and pushed.id
    jobs.fail_now.push("x")
    result = workers.run("--stop-when-empty")
    assert result.returncode == 0, result.stderr
    assert list(Record.objects.exclude(kind__startswith="signal").values_list("kind", "value")) == [
        ("record", "hello"), ("fail-now", "x")]
    failed = FailedJob.objects.get()
    assert failed.error_summary == "Fail: no such thing: x"
