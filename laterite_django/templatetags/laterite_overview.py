"""Template filters of the admin's overview page."""

from __future__ import annotations

from django import template

from ..worker.attempt import for_humans

__all__ = ["age"]

register = template.Library()


@register.filter
def age(seconds: float) -> str:
    """A wait as a person reads it: 0.5 s, 2 min 5 s, 3 h 20 min."""
    return for_humans(float(seconds))
