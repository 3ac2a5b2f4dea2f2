-- Privileges of the portal's application role on PostgreSQL: full use of its tables, but the
-- audit log can only be read and appended to. Run as the role that owns the tables (the one
-- that runs `manage.py migrate`), after every migrate (new tables need their grants), with
-- the application role's name in place of portal_app:
--   psql "$OWNER_DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/postgres/audit-grants.sql
-- Then check it as the application role: `manage.py check_audit_grants` (exit 1 if not so).
GRANT USAGE ON SCHEMA public TO portal_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO portal_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO portal_app;
-- The portal's own functions (the usage rollup's usage_source_sampled), also where EXECUTE is
-- not left to PUBLIC.
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO portal_app;
-- The events: the triggers refuse UPDATE and DELETE, but not TRUNCATE, and a role with these
-- privileges (or owning the table) could also lift the triggers.
REVOKE UPDATE, DELETE, TRUNCATE, TRIGGER, REFERENCES ON quotas_auditevent FROM portal_app;
-- The chain head is updated by every append, but never deleted or emptied.
REVOKE DELETE, TRUNCATE, TRIGGER, REFERENCES ON quotas_auditchainhead FROM portal_app;
