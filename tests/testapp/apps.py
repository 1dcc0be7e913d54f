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
