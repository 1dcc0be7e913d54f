"""Settings for mypy's django-stubs plugin: only the apps whose models the package uses.

Every other setting keeps Django's default, so mypy types `settings.DATABASES` and
the like as Django declares them, not as one test configuration happens to set them.
"""

SECRET_KEY = "laterite-typecheck"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "laterite_django",
]
