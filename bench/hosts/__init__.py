"""Simulated hosts against one store: network namespaces, PgBouncer, Redis Sentinel.

The pieces (`pgbouncer`, `sentinel`, `netns`, `cluster`) start and stop the
real programs; `run` drives the scale and fault runs (`python -m bench.hosts`).
The CI's short version (tests/hosts/) uses the same pieces.
"""
