"""gunicorn settings for the web server tests, as the README tells users to write them."""

from laterite_django.worker.serving import post_worker_init, worker_exit  # noqa: F401
