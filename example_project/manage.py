#!/usr/bin/env python
"""The example project's manage.py (laterite-django installed: `pip install -e .` from a clone)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
