"""Chains and batches: calls run in order, or together and then callbacks (see the
README's Workflows). `job.call(...)` makes a call; `chain` and `batch` push them."""

from ..calls import JobCall
from .batches import BatchPlan, add_to_batch, batch, cancel_batch
from .chains import Chain, chain

__all__ = ["BatchPlan", "Chain", "JobCall", "add_to_batch", "batch", "cancel_batch", "chain"]
