"""python -m bench.hosts: the multi-host scale and fault runs (see bench/hosts/run.py)."""

from .run import main

main()
