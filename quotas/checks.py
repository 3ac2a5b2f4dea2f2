"""System checks of the audit log's integrity settings and the plan rules' defaults
(`manage.py check [--deploy]`)."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

AUDIT_MAC_KEY_MIN_LENGTH = 32


@register(Tags.security)
def audit_mac_key_demo(app_configs, **kwargs) -> list:
    if settings.AUDIT_MAC_KEY:
        return []
    return [
        Warning(
            "AUDIT_MAC_KEY is not set: the audit log is MACed with a key derived from "
            "DJANGO_SECRET_KEY (demo only).",
            hint="Set AUDIT_MAC_KEY to a random secret kept out of the database "
            '(python -c "import secrets; print(secrets.token_hex(32))").',
            id="quotas.W001",
        )
    ]


@register(Tags.security, deploy=True)
def audit_mac_key_deploy(app_configs, **kwargs) -> list:
    if settings.DEBUG:
        return []
    if not settings.AUDIT_MAC_KEY:
        return [
            Error(
                "AUDIT_MAC_KEY is not set: anyone who knows DJANGO_SECRET_KEY can rewrite the "
                "audit log undetected, and rotating the secret key breaks its verification.",
                hint="Set AUDIT_MAC_KEY (at least 32 characters) in the environment.",
                id="quotas.E001",
            )
        ]
    if len(settings.AUDIT_MAC_KEY) < AUDIT_MAC_KEY_MIN_LENGTH:
        return [
            Error(
                f"AUDIT_MAC_KEY has {len(settings.AUDIT_MAC_KEY)} characters; at least "
                f"{AUDIT_MAC_KEY_MIN_LENGTH} are required.",
                id="quotas.E002",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def audit_anchor_deploy(app_configs, **kwargs) -> list:
    if settings.DEBUG or (settings.AUDIT_ANCHOR_FILE and not settings.AUDIT_ANCHOR_FILE_IS_DEMO):
        return []
    where = (
        f"only in the demo's file {settings.AUDIT_ANCHOR_FILE}, beside the portal's data"
        if settings.AUDIT_ANCHOR_FILE
        else "nowhere but the log stream"
    )
    return [
        Error(
            f"AUDIT_ANCHOR_FILE is not set: the audit log's head is anchored {where}, so a log "
            "emptied together with its head may go unnoticed.",
            hint="Set AUDIT_ANCHOR_FILE to an append-only file (chattr +a) on storage the "
            "database's users cannot reach (the anchors are also logged by quotas.audit.anchor, "
            "for log shipping).",
            id="quotas.E003",
        )
    ]


@register()
def quota_share_defaults(app_configs, **kwargs) -> list:
    """The portal-wide shares the plan rules use are within (0, 1]."""
    errors = []
    for name in ("QUOTA_DEFAULT_MAX_CAP_SHARE", "QUOTA_DEFAULT_TOP_PRIORITY_SHARE"):
        value = getattr(settings, name)
        if value is None and name == "QUOTA_DEFAULT_TOP_PRIORITY_SHARE":
            continue
        if not isinstance(value, (int, float)) or not 0 < value <= 1:
            errors.append(
                Error(
                    f"{name} is {value!r}: it must be a share above 0 and at most 1 "
                    "(0.5 is half of the capacity).",
                    id="quotas.E010",
                )
            )
    return errors


@register()
def quota_currency(app_configs, **kwargs) -> list:
    """Costs are shown with the currency's ISO 4217 code: three capital letters."""
    value = settings.QUOTA_CURRENCY
    if isinstance(value, str) and len(value) == 3 and value.isascii() and value.isupper():
        return []
    return [
        Error(
            f"QUOTA_CURRENCY is {value!r}: it must be a currency's ISO 4217 code, three "
            "capital letters (USD, EUR, CNY).",
            id="quotas.E011",
        )
    ]
