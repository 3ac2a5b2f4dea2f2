"""Who is a platform admin: one answer for one user (is_platform_admin) and for a query of all
of them (platform_admins, whom notifications go to)."""

import pytest
from django.contrib.auth.models import User

from quotas.roles import PLATFORM_ADMINS, is_platform_admin, platform_admins
from tests.support.people import make_user

pytestmark = pytest.mark.django_db


def test_the_query_and_the_check_agree_on_every_kind_of_user(admin, auditor, lead_a, member_a):
    User.objects.create_superuser("root", "root@example.com", "pw")
    gone = make_user("gone-admin", groups=(PLATFORM_ADMINS,))
    gone.is_active = False
    gone.save()
    retired_root = User.objects.create_superuser("retired", "retired@example.com", "pw")
    retired_root.is_active = False
    retired_root.save()
    everyone = User.objects.all()
    expected = {u.username for u in everyone if is_platform_admin(u)}
    assert expected == {"admin", "root"}
    assert {u.username for u in platform_admins()} == expected
