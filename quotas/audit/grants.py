"""Whether the database role the portal runs as could erase or rewrite the audit log.

On PostgreSQL the append-only triggers refuse UPDATE and DELETE, but TRUNCATE bypasses them and
the tables' owner (or a superuser) can lift them: the application role must own neither table
and hold no UPDATE, DELETE or TRUNCATE on the events (deploy/postgres/audit-grants.sql).
"""

from dataclasses import dataclass

from django.db.backends.base.base import BaseDatabaseWrapper

# Privileges the application role must not hold, per audit table (the head takes UPDATE).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "quotas_auditevent": ("UPDATE", "DELETE", "TRUNCATE", "TRIGGER"),
    "quotas_auditchainhead": ("DELETE", "TRUNCATE", "TRIGGER"),
}
# Privileges it needs to append.
REQUIRED: dict[str, tuple[str, ...]] = {
    "quotas_auditevent": ("SELECT", "INSERT"),
    "quotas_auditchainhead": ("SELECT", "INSERT", "UPDATE"),
}


@dataclass(frozen=True)
class GrantsReport:
    role: str
    supported: bool
    problems: list[str]

    @property
    def ok(self) -> bool:
        return self.supported and not self.problems


def audit_grants_check(connection: BaseDatabaseWrapper) -> GrantsReport:
    """What the role of ``connection`` may do to the audit tables, as problems to fix."""
    if connection.vendor != "postgresql":
        return GrantsReport(role="", supported=False, problems=[])
    problems: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        role, superuser = cursor.fetchone()
        if superuser:
            problems.append(f"role {role} is a superuser: it can do anything to the audit log")
        for table in FORBIDDEN:
            cursor.execute(
                "SELECT pg_get_userbyid(relowner), pg_has_role(current_user, relowner, 'MEMBER')"
                " FROM pg_class WHERE oid = to_regclass(%s)",
                [table],
            )
            row = cursor.fetchone()
            if row is None:
                problems.append(f"{table}: table not found (migrated?)")
                continue
            owner, owns = row
            if owns:
                problems.append(
                    f"{table}: owned by {owner}, a role {role} has: it can lift the triggers "
                    "and grant itself anything (migrate as another role)"
                )
            for privilege in FORBIDDEN[table]:
                cursor.execute("SELECT has_table_privilege(%s, %s)", [table, privilege])
                if cursor.fetchone()[0]:
                    problems.append(f"{table}: {role} may {privilege} (revoke it)")
            for privilege in REQUIRED[table]:
                cursor.execute("SELECT has_table_privilege(%s, %s)", [table, privilege])
                if not cursor.fetchone()[0]:
                    problems.append(f"{table}: {role} may not {privilege}, which appending needs")
    return GrantsReport(role=role, supported=True, problems=problems)
