from django.db import models


class Record(models.Model):
    """A line written by a test job, so tests can see what ran, where and when."""

    kind = models.CharField(max_length=50)
    value = models.CharField(max_length=200, blank=True)
    attempt = models.IntegerField(default=0)
    pid = models.IntegerField(default=0)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "testapp"

    def __str__(self) -> str:
        return f"{self.kind} {self.value} (attempt {self.attempt})"
