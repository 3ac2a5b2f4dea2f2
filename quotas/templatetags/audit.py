"""Template filters for audit events: `{% load audit %}{{ event.action|action_label }}`."""

from django import template

from quotas.audit.labels import action_label as _action_label

register = template.Library()


@register.filter
def action_label(action: str) -> str:
    return _action_label(action)
