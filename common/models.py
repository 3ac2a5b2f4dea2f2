"""The kernel's one table: the API's idempotency keys (the code that uses them is
common.api.idempotency)."""

from common.api.idempotency import IdempotencyKey

__all__ = ["IdempotencyKey"]
