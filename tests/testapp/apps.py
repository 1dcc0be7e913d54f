import os

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from laterite_django.signals import job_failed, job_retrying

        from .models import Record

        def on_failed(sender, id, name, queue, attempts, error, payload, **kwargs):
            Record.objects.create(
                kind="signal-failed", value=f"{id}|{name}|{queue}|{attempts}|{payload}",
                attempt=attempts,
            )

        def on_retrying(sender, id, name, attempts, error, delay, **kwargs):
            Record.objects.create(kind="signal-retrying", value=f"{name}|{delay:g}",
                                  attempt=attempts)

        job_failed.connect(on_failed, weak=False, dispatch_uid="testapp_failed")
        job_retrying.connect(on_retrying, weak=False, dispatch_uid="testapp_retrying")
        if os.environ.get("LATERITE_TEST_RAISING_RECEIVERS"):
            connect_raising_receivers()


def connect_raising_receivers() -> None:
    """Receivers that raise, each something else, to show a worker shrugs them off."""
    from laterite_django.signals import job_failed, job_retrying, job_started, job_succeeded

    def raise_runtime(**kwargs):
        raise RuntimeError("a receiver of job_started broke")

    def raise_exit(**kwargs):
        raise SystemExit("a receiver of job_failed exits")

    def raise_interrupt(**kwargs):
        raise KeyboardInterrupt

    def raise_value(**kwargs):
        raise ValueError("a receiver of job_succeeded broke")

    job_started.connect(raise_runtime, weak=False, dispatch_uid="raising_started")
    job_failed.connect(raise_exit, weak=False, dispatch_uid="raising_failed")
    job_retrying.connect(raise_interrupt, weak=False, dispatch_uid="raising_retrying")
    job_succeeded.connect(raise_value, weak=False, dispatch_uid="raising_succeeded")
