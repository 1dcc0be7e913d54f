"""The bench's laterite jobs: an installed app whose jobs.py laterite finds."""
