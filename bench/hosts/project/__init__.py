"""The Django project the simulated hosts run: its settings and its two jobs."""
