"""Benchmark laterite_django against its peers: see bench/README.md."""
