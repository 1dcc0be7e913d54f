"""The Django settings the manual's build imports the package under.

autodoc and the reference directives import laterite_django, which needs configured
settings and a loaded app registry; nothing connects to the database while building.
The settings shown in the reference are the package's defaults, not these.
"""

SECRET_KEY = "laterite-docs"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "laterite_django",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
