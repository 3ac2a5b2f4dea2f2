"""System checks of the audit log's integrity settings (`manage.py check [--deploy]`)."""

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
