"""Moves started at the same moment from threads with their own database connections, for the
race tests of services that decide more than one request (approvals.bulk, the extensions)."""

import threading
from decimal import Decimal

from django.db import connection
from django.db.models import Sum

from common.errors import ApplicationError
from quotas.models import Allocation


def race(*moves) -> list[str]:
    """Start every move at once (a barrier); each returns "ok" or the refusal's class name
    (a deadlock or another crash shows as "crash: ...")."""
    barrier = threading.Barrier(len(moves))
    outcomes: list[str | None] = [None] * len(moves)

    def run(index, move):
        barrier.wait()
        try:
            move()
            outcomes[index] = "ok"
        except ApplicationError as exc:
            outcomes[index] = type(exc).__name__
        except Exception as exc:
            outcomes[index] = f"crash: {type(exc).__name__}: {exc}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(moves)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def guaranteed(cluster) -> Decimal:
    """What the cluster's allocations guarantee in all."""
    total = Allocation.objects.filter(team_namespace__cluster=cluster).aggregate(
        total=Sum("guarantee")
    )["total"]
    return total or Decimal(0)
