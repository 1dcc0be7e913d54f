import os

from django.contrib import admin
from django.http import HttpResponse
from django.urls import path

import laterite_django.metrics


def ping(request):
    """Answer with this process's pid (web server tests: which worker served)."""
    return HttpResponse(str(os.getpid()))


urlpatterns = [
    path("admin/", admin.site.urls),
    path("ping/", ping),
    path("metrics/", laterite_django.metrics.view),
]
