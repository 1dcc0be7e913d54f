"""Recurring schedules: definitions (definition.py), their ticks (ticks.py), what is due
(plan.py) and the scheduler that fires them through the store (scheduler.py)."""
