"""The test project's WSGI application (web server tests run it under gunicorn)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

application = get_wsgi_application()
