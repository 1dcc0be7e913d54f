"""The core: plain values and pure rules every layer may use (claims, new jobs, counts,
the rule book and backoff, the column sizes, the limits parsed from settings, the ends
of workflows' jobs). It imports nothing else of the package."""
