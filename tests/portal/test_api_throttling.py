"""API throttles: failed token attempts per address, requests per token and per address;
429 with Retry-After in the one error shape. Counts are shared through the cache (Redis in
production), which the last tests check across processes."""

import os
import subprocess
import sys
import uuid
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from portal.api import throttling
from portal.api.throttling import window_hit
from portal.tokens import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(settings):
    """Set throttle rates for one test: rates(token="3/min", ...)."""

    def set_rates(**scopes):
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {
                **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
                **scopes,
            },
        }

    return set_rates


def get(token: str | None, *, address: str = "10.1.0.1", path: str = "/api/v1/teams/"):
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get(path, REMOTE_ADDR=address)


def assert_throttled(response) -> None:
    assert response.status_code == 429
    body = response.json()
    assert set(body) == {"message", "extra"}
    assert body["extra"]["code"] == "throttled"
    retry = int(response["Retry-After"])
    assert 0 < retry <= 60
    assert body["extra"]["retry_after"] == retry


def test_failed_tokens_from_one_address_are_throttled_even_the_right_one(lead_a, rates):
    rates(token_failure="5/min")
    _, good = api_token_create(user=lead_a, name="ci")
    for i in range(5):
        assert get(f"gqp_wrong{i}").status_code == 401
    assert_throttled(get("gqp_wrong-again"))
    # Once over the budget the address learns nothing, not even from a right token.
    throttled = get(good)
    assert_throttled(throttled)
    assert "failed API token attempts" in throttled.json()["message"]
    # Another address is not affected.
    assert get(good, address="10.1.0.2").status_code == 200


@pytest.fixture
def clock(monkeypatch):
    """The throttles' clock, set by the test: a fixed window does not end halfway through it
    (sixty requests crossing a minute's end would meet two windows of twenty)."""
    now = [1_800_000_000.0]  # the start of a minute
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: now[0]))
    return now


def test_sixty_invalid_tokens_do_not_all_get_an_answer(lead_a, clock):
    statuses = [get(f"gqp_guess{i}").status_code for i in range(60)]
    assert statuses.count(401) == 20  # the default API_THROTTLE_TOKEN_FAILURE_RATE: 20/min
    assert set(statuses[20:]) == {429}
    # Seconds before the minute ends the address still learns nothing; in the next, it may
    # try twenty again.
    clock[0] += 59
    assert_throttled(get("gqp_guess-late"))
    clock[0] += 1
    assert get("gqp_guess-next").status_code == 401


def test_requests_are_throttled_per_token(lead_a, rates):
    rates(token="3/min")
    _, first = api_token_create(user=lead_a, name="one")
    _, second = api_token_create(user=lead_a, name="two")
    for i in range(3):
        assert get(first, address=f"10.2.0.{i}").status_code == 200
    assert_throttled(get(first, address="10.2.0.9"))
    assert get(second).status_code == 200


def test_requests_are_throttled_per_address(lead_a, rates):
    rates(address="4/min")
    _, token = api_token_create(user=lead_a, name="ci")
    for _ in range(4):
        assert get(token, address="10.3.0.1").status_code == 200
    assert_throttled(get(token, address="10.3.0.1"))
    assert get(token, address="10.3.0.2").status_code == 200


def test_a_forged_forwarded_for_header_does_not_dodge_the_address_throttle(lead_a, rates):
    rates(address="2/min")
    _, token = api_token_create(user=lead_a, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    answers = [
        client.get("/api/v1/teams/", REMOTE_ADDR="10.4.0.1", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")
        for i in range(3)
    ]
    assert [a.status_code for a in answers] == [200, 200, 429]


def test_behind_trusted_proxies_the_address_is_the_one_the_proxy_saw(lead_a, rates, settings):
    settings.PORTAL_TRUSTED_PROXY_COUNT = 1
    rates(address="1/min")
    _, token = api_token_create(user=lead_a, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    first = client.get(
        "/api/v1/teams/", REMOTE_ADDR="10.5.0.1", HTTP_X_FORWARDED_FOR="spoof, 192.0.2.1"
    )
    other = client.get(
        "/api/v1/teams/", REMOTE_ADDR="10.5.0.1", HTTP_X_FORWARDED_FOR="spoof, 192.0.2.2"
    )
    again = client.get(
        "/api/v1/teams/", REMOTE_ADDR="10.5.0.1", HTTP_X_FORWARDED_FOR="x, 192.0.2.1"
    )
    assert [first.status_code, other.status_code, again.status_code] == [200, 200, 429]


REDIS = os.environ.get("CELERY_BROKER_URL", "")


def test_the_cache_is_redis_when_the_broker_is_and_memory_otherwise():
    code = (
        "import django;django.setup();from django.conf import settings as s;"
        "c=s.CACHES['default'];print(c['BACKEND'], c.get('LOCATION', ''))"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("CACHE_URL", "CELERY_BROKER_URL")}
    base["DJANGO_SETTINGS_MODULE"] = "portal.settings"

    def backend(**env) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.split()

    assert backend() == ["django.core.cache.backends.locmem.LocMemCache"]
    assert backend(CELERY_BROKER_URL="redis://127.0.0.1:6379/3") == [
        "django.core.cache.backends.redis.RedisCache",
        "redis://127.0.0.1:6379/3",
    ]
    assert backend(CACHE_URL="redis://cache:6379/1", CELERY_BROKER_URL="redis://b:6379/0") == [
        "django.core.cache.backends.redis.RedisCache",
        "redis://cache:6379/1",
    ]


@pytest.mark.skipif(
    not REDIS.startswith("redis://") and os.environ.get("CI") != "true",
    reason="needs Redis (CELERY_BROKER_URL=redis://...)",
)
def test_counts_are_shared_by_processes_through_redis(settings):
    """Two processes throttling the same client see one count."""
    assert REDIS.startswith("redis://"), "CI must run with Redis"
    prefix = f"throttle-test-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS,
            "KEY_PREFIX": prefix,
        }
    }
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        # A day-long window: a minute boundary between the hits would reset the count.
        "DEFAULT_THROTTLE_RATES": {"address": "3/day"},
    }
    try:
        assert window_hit("address", "10.6.0.1") is None
        assert window_hit("address", "10.6.0.1") is None
        code = (
            "import django;django.setup();"
            "from portal.api.throttling import window_hit;"
            "print(window_hit('address', '10.6.0.1'))"
        )
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "CACHE_URL": REDIS,
            "API_THROTTLE_ADDRESS_RATE": "3/day",
        }
        # The other process counts under the settings' own key prefix: use the same one.
        env_code = code.replace(
            "django.setup();",
            f"django.setup();from django.conf import settings as s;"
            f"s.CACHES['default']['KEY_PREFIX']={prefix!r};",
        )
        out = subprocess.run(
            [sys.executable, "-c", env_code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "None"  # the third hit, counted over there
        assert window_hit("address", "10.6.0.1") is not None  # the fourth, here: over
    finally:
        for key in cache._cache.get_client().scan_iter(f"{prefix}:*"):
            cache._cache.get_client().delete(key)
