"""Every model of the portal is in the Django admin, and its list works for a platform admin."""

import pytest
from django.apps import apps
from django.contrib import admin

APPS = ("portal", "quotas", "approvals")


def test_every_model_is_registered():
    missing = [
        m._meta.label
        for app in APPS
        for m in apps.get_app_config(app).get_models()
        if m not in admin.site._registry
    ]
    assert missing == []


@pytest.mark.django_db
def test_every_changelist_opens_for_a_platform_admin(client, admin):
    client.force_login(admin)
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            url = f"/admin/{app}/{model._meta.model_name}/"
            assert client.get(url).status_code == 200, url
