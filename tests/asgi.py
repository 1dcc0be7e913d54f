"""The test project's ASGI application, its lifespan running the worker threads (uvicorn)."""

import os

from django.core.asgi import get_asgi_application

from laterite_django.worker.serving import with_worker_threads

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

application = with_worker_threads(get_asgi_application())
