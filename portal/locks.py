"""The one order every transaction takes its row locks in, over every app's tables.

Two transactions that lock rows in the same order wait for each other; in different orders
they can deadlock. Each app locks its own rows through its locks module (quotas.locks,
usage.locks, approvals.locks) in this order: a transaction never locks a row of a table that
comes earlier than one it already locked, and rows of one table in id order. The audit chain
head, locked by every audit write, is last: write the audit events after the other locks. (An
UPDATE locks its rows too: ``cluster_plan_touch`` locks the cluster.) The shell states it
because it is the one part that knows every app; tests/approvals/test_lock_order.py holds every
transaction's locks against it.
"""

LOCK_ORDER: tuple[str, ...] = (
    # Who is who and the catalogue (edited in the admin, quotas.people, quotas.teams,
    # quotas.clusters): before anything a decision locks.
    "auth.Group",
    "auth.User",
    "quotas.Team",
    "quotas.TeamMembership",
    "quotas.Resource",
    # A request made from a suggestion: one at a time, so two clicks make one request.
    "usage.Suggestion",
    # What a decision draws on: two admins approving competing requests serialize here
    # instead of both seeing the same free GPUs; a capacity change waits for them.
    "quotas.ClusterCapacity",
    # The request decided (approvals.locks.lock_request).
    "approvals.QuotaRequest",
    # What the decision changes.
    "quotas.Allocation",
    "quotas.TeamNamespace",
    # A namespace's maximum run times (after its namespace; the class they name comes next).
    "quotas.RunTimeLimit",
    # Before the clusters: removing a class checks the allocations with the clusters locked,
    # as every approval locks the clusters before it writes an allocation's classes.
    "quotas.PriorityClass",
    "quotas.Cluster",
    "approvals.ApprovalPolicy",
    # Every audit write: always the last lock.
    "quotas.AuditChainHead",
)
