"""Why a call does not fit a function's signature: every reason at once, where Python's
own binding stops at the first (a missing `a` hides an unexpected `y`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["mismatch"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def mismatch(signature: inspect.Signature, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """Return each problem of binding (args, kwargs) to `signature`, joined by "; "."""
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    var_args = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    var_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    by_name = {p.name: p for p in params if p.kind not in _VAR}
    problems = []
    if len(args) > len(positional) and not var_args:
        problems.append(
            f"takes {len(positional)} positional argument{'s' * (len(positional) != 1)} "
            f"but {len(args)} were given"
        )
    bound = {p.name for p in positional[: len(args)]}
    unexpected, twice, by_keyword = [], [], []
    for key in kwargs:
        param = by_name.get(key)
        if param is None or param.kind is inspect.Parameter.POSITIONAL_ONLY:
            if param is not None and not var_kwargs:
                by_keyword.append(key)
            elif param is None and not var_kwargs:
                unexpected.append(key)
            continue
        if key in bound:
            twice.append(key)
        bound.add(key)
    missing = [
        p.name for p in params
        if p.kind not in _VAR and p.default is inspect.Parameter.empty and p.name not in bound
    ]
    for label, names in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("given twice", twice),
        ("positional-only, passed by keyword", by_keyword),
    ):
        if names:
            listed = ", ".join(map(repr, names))
            problems.append(f"{listed} {label}" if label == "given twice" else f"{label} {listed}")
    return "; ".join(problems)

