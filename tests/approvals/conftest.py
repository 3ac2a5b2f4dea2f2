"""Helpers for approvals tests; the seed example fixtures (plan, lead_c, strict_policy) live in
tests/conftest.py."""

from django.utils import timezone

from approvals.lifecycle import request_create
from approvals.lines import LineInput


def new_request(user, ns, gpu, guarantee, cap, *, kind="permanent", ends_in=None, **kwargs):
    return request_create(
        team=ns.team,
        acting_user=user,
        justification="more training runs",
        lines=[LineInput(ns.pk, gpu.pk, guarantee, cap, kwargs.get("per_pod_max"))],
        kind=kind,
        starts_at=kwargs.get("starts_at"),
        ends_at=timezone.now() + ends_in if ends_in else None,
    )
