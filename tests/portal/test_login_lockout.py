"""Login lockout (django-axes and portal.lockout): repeated failures lock the pair of user name
and address; many more lock a user name across addresses, or an address across user names,
except where that user has signed in before. For the portal's login and the Django admin's
alike, until the cool-off ends or an admin unlocks."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db


def login(
    client: Client, username: str, password: str, *, address: str = "10.0.0.1", url="/login/"
):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in_as(client: Client) -> str | None:
    page = client.get("/").content.decode()
    if 'data-testid="current-user"' not in page:
        return None
    return page.split('data-testid="current-user">', 1)[1].split("<", 1)[0]


def test_sixty_wrong_passwords_then_the_right_one_does_not_log_in(lead_a, settings):
    assert settings.AXES_FAILURE_LIMIT == 10
    client = Client()
    for _ in range(60):
        login(client, "lead-a", "wrong")
    response = login(client, "lead-a", "pw")
    assert response.status_code == 429
    assert 'data-testid="locked-out"' in response.content.decode()
    assert 0 < int(response["Retry-After"]) <= 15 * 60
    assert logged_in_as(client) is None


def test_below_the_limit_the_right_password_logs_in_and_resets_the_count(lead_a):
    client = Client()
    for _ in range(9):
        assert login(client, "lead-a", "wrong").status_code == 200
    assert login(client, "lead-a", "pw").status_code == 302
    assert logged_in_as(client) == "lead-a"
    assert AccessAttempt.objects.filter(username="lead-a").count() == 0


def test_nobody_elsewhere_can_lock_a_user_out(lead_a, admin):
    for _ in range(10):
        login(Client(), "lead-a", "wrong", address="10.0.1.1")
    # The pair is locked ...
    assert login(Client(), "lead-a", "pw", address="10.0.1.1").status_code == 429
    # ... not the user name from elsewhere, nor the address for another user.
    assert login(Client(), "lead-a", "pw", address="10.0.1.2").status_code == 302
    assert login(Client(), "admin", "pw", address="10.0.1.1").status_code == 302


def test_failures_from_many_addresses_lock_the_user_name_where_it_never_signed_in(lead_a, settings):
    assert login(Client(), "lead-a", "pw", address="10.0.2.250").status_code == 302
    limit = settings.LOGIN_LOCKOUT_WIDE_FAILURES
    assert limit > settings.AXES_FAILURE_LIMIT
    for i in range(limit):
        login(Client(), "lead-a", "wrong", address=f"10.0.{3 + i // 200}.{i % 200}")
    response = login(Client(), "lead-a", "pw", address="10.0.2.1")
    assert response.status_code == 429
    assert 'data-testid="locked-out"' in response.content.decode()
    # Where lead-a signed in before, lead-a still gets in.
    assert login(Client(), "lead-a", "pw", address="10.0.2.250").status_code == 302


def test_failures_for_many_names_lock_the_address_for_users_new_to_it(lead_a, admin, settings):
    assert login(Client(), "admin", "pw", address="10.0.3.1").status_code == 302
    for i in range(settings.LOGIN_LOCKOUT_WIDE_FAILURES):
        login(Client(), f"guess-{i}", "wrong", address="10.0.3.1")
    assert login(Client(), "lead-a", "pw", address="10.0.3.1").status_code == 429
    # Another address is not locked, nor a user who signed in from this one before.
    assert login(Client(), "lead-a", "pw", address="10.0.3.2").status_code == 302
    assert login(Client(), "admin", "pw", address="10.0.3.1").status_code == 302


def test_below_the_wide_limit_nothing_is_locked_but_the_pairs(lead_a, settings):
    for i in range(settings.LOGIN_LOCKOUT_WIDE_FAILURES - 1):
        login(Client(), "lead-a", "wrong", address=f"10.0.5.{i % 200}")
    assert login(Client(), "lead-a", "pw", address="10.0.6.1").status_code == 302


def test_a_forged_forwarded_for_header_does_not_dodge_the_address_lock(lead_a, settings):
    for i in range(settings.LOGIN_LOCKOUT_WIDE_FAILURES):
        Client().post(
            "/login/",
            {"username": f"guess-{i}", "password": "wrong"},
            REMOTE_ADDR="10.0.4.1",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}",
        )
    response = Client().post(
        "/login/",
        {"username": "lead-a", "password": "pw"},
        REMOTE_ADDR="10.0.4.1",
        HTTP_X_FORWARDED_FOR="192.0.2.99",
    )
    assert response.status_code == 429


def test_the_django_admin_login_is_locked_too(admin):
    for _ in range(10):
        login(Client(), "admin", "wrong", url="/admin/login/")
    response = login(Client(), "admin", "pw", url="/admin/login/")
    assert response.status_code == 429
    # Only that pair: the admin gets in from elsewhere.
    assert (
        login(Client(), "admin", "pw", address="10.9.9.9", url="/admin/login/").status_code == 302
    )


def test_the_lock_ends_after_the_cool_off(lead_a, settings):
    for _ in range(10):
        login(Client(), "lead-a", "wrong")
    assert login(Client(), "lead-a", "pw").status_code == 429
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    assert login(Client(), "lead-a", "pw").status_code == 302


def test_a_platform_admin_unlocks_in_the_admin(lead_a, admin):
    for _ in range(10):
        login(Client(), "lead-a", "wrong")
    assert login(Client(), "lead-a", "pw").status_code == 429

    staff = Client()
    staff.force_login(admin)
    attempts = staff.get("/admin/axes/accessattempt/")
    assert attempts.status_code == 200
    assert "lead-a" in attempts.content.decode()
    ids = [str(pk) for pk in AccessAttempt.objects.values_list("pk", flat=True)]
    response = staff.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )
    assert response.status_code == 302
    assert not AccessAttempt.objects.exists()
    assert login(Client(), "lead-a", "pw").status_code == 302


def test_lockout_settings_come_from_the_environment():
    import subprocess
    import sys

    code = (
        "import django,os;django.setup();from django.conf import settings as s;"
        "print(s.AXES_FAILURE_LIMIT, int(s.AXES_COOLOFF_TIME.total_seconds()), s.AXES_ENABLED,"
        " s.LOGIN_LOCKOUT_WIDE_FAILURES)"
    )
    env = {
        **__import__("os").environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "LOGIN_LOCKOUT_FAILURES": "4",
        "LOGIN_LOCKOUT_MINUTES": "2",
        "LOGIN_LOCKOUT_WIDE_FAILURES": "40",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["4", "120", "True", "40"]
