"""Hostile input on every endpoint: zero 5xx, and every API refusal in the one error shape.

The endpoints are read from the URL conf, so a new endpoint is covered without touching this
file: every API write (POST/PUT/PATCH/DELETE) gets hostile JSON bodies, every API read gets
hostile filter parameters, and every page is POSTed hostile form data and GET hostile queries.
"""

import json
import re

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from portal.tokens import api_token_create
from tests.support.api import API, PAGES, view_methods
from tests.support.api import body as request_body

pytestmark = pytest.mark.django_db

MB = "x" * (1 << 20)
DEEP = 100_000


assert API and PAGES, "the URL conf walk found nothing: stale"


def filter_names(callback) -> set[str]:
    """Query parameters a list view reads: its ``filters`` map and the usual names."""
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    names = {"status", "team", "cluster", "namespace", "resource", "action", "since"}
    names |= {"page", "page_size", "q", "ordering", "waiting", "format", "cursor", "limit"}
    names |= set(getattr(cls, "filters", {}) or {})
    names |= set(getattr(getattr(cls, "filterset_class", None), "base_filters", {}) or {})
    return names


def fill(route: str, ids: dict[str, object], action_choices: list[str]) -> list[str]:
    """Concrete URLs for a route: converters replaced by existing objects' keys."""
    urls = [route]
    for match in re.finditer(r"<(?:(\w+):)?(\w+)>", route):
        converter, name = match.group(1) or "str", match.group(2)
        token = match.group(0)
        if converter == "int":
            values = [str(ids["request"]), "99999999999999999999999"]
        elif converter == "slug":
            values = [str(ids["team"])]
        elif name == "action":
            values = action_choices
        else:
            values = ["x"]
        urls = [u.replace(token, v, 1) for u in urls for v in values]
    return ["/" + u for u in urls]


HOSTILE_BODIES: dict[str, bytes] = {
    "deeply nested list": b"[" * DEEP + b"]" * DEEP,
    "deeply nested object": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "nested past the depth limit": b'{"lines": ' + b"[" * 40 + b'"x"' + b"]" * 40 + b"}",
    "1 MB strings": json.dumps(
        {
            "team": MB,
            "justification": MB,
            "kind": MB,
            "comment": MB,
            "lines": [{"namespace": MB, "cluster": MB, "resource": MB, "guarantee": MB, "cap": MB}],
            "decisions": [{"line": MB, "guarantee": MB, "cap": MB}],
        }
    ).encode(),
    "NUL characters": json.dumps(
        {
            "team": "team-c\x00",
            "justification": "\x00",
            "kind": "permanent\x00",
            "comment": "a\x00b",
            "lines": [{"namespace": "\x00", "cluster": "demo", "resource": "\x00"}],
        }
    ).encode(),
    "a NUL in a key": b'{"comment\\u0000": "x"}',
    "lone surrogates": (
        b'{"team": "\\ud800", "kind": "\\ud800", "justification": "\\udfff", '
        b'"comment": "\\ud800", "lines": [{"namespace": "\\ud800", "cluster": "\\ud800", '
        b'"resource": "\\ud800", "guarantee": "\\ud800", "cap": "1"}], '
        b'"decisions": [{"line": "\\ud800", "guarantee": "1", "cap": "1"}]}'
    ),
    "a lone surrogate in a key": b'{"\\ud800": 1}',
    "wrong types": json.dumps(
        {
            "team": ["team-c"],
            "justification": {"a": 1},
            "kind": 5,
            "starts_at": [],
            "ends_at": True,
            "submit": "perhaps",
            "comment": ["a"],
            "lines": "all of them",
            "decisions": {"line": 1},
        }
    ).encode(),
    "wrong types inside lines": json.dumps(
        {
            **request_body(),
            "lines": [
                {"namespace": 1, "cluster": None, "resource": [], "guarantee": {}, "cap": True},
                "a line",
                None,
            ],
            "decisions": [{"line": 10**30, "guarantee": "1e999", "cap": "NaN"}, 7],
        }
    ).encode(),
    "huge numbers": json.dumps(
        {
            **request_body(guarantee="9" * 400, cap="1e400"),
            "decisions": [{"line": 10**40, "guarantee": "9" * 40, "cap": -(10**40)}],
        }
    ).encode(),
    "unknown fields": json.dumps(
        {**request_body(), "bogus": 1, "id": 5, "status": "applied"}
    ).encode(),
    "a list body": b"[1, 2, 3]",
    "a number body": b"5",
    "null": b"null",
    "a string body": b'"request"',
    "NaN": b'{"comment": NaN}',
    "not JSON": b"{'team': 'team-c'",
    "not UTF-8": b'{"comment": "\xff\xfe"}',
    "empty": b"",
    "larger than the upload limit": b'{"comment": "' + b"x" * (3 << 20) + b'"}',
}

HOSTILE_VALUES = {
    "NUL": "a\x00b",
    "only NUL": "\x00",
    "1 MB": MB,
    "surrogate escapes": "%ED%A0%80",
    "not a number": "-1e999",
    "huge number": "9" * 100,
}


def assert_one_error_shape(response, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code}"
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json"), what
        body = response.json()
        assert set(body) == {"message", "extra"}, what
        assert isinstance(body["message"], str) and body["message"], what
        assert isinstance(body["extra"], dict), what


@pytest.fixture
def world(plan, lead_c, admin, strict_policy, settings):
    """A submitted and a draft request, tokens of a lead and an admin; throttles out of the way."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": None, "address": None, "token_failure": None},
    }
    tokens = {u.username: api_token_create(user=u, name="t")[1] for u in (lead_c, admin)}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens['lead-c']}")
    submitted = client.post("/api/v1/requests/", request_body(), format="json").json()
    draft = client.post("/api/v1/requests/", request_body(submit=False), format="json").json()
    return {
        "tokens": tokens,
        "ids": {"request": submitted["id"], "draft": draft["id"], "team": "team-c"},
        "users": {"lead-c": lead_c, "admin": admin},
    }


def api_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


ACTIONS = ["submit", "withdraw", "approve", "reject", "changes", "rebase", "revoke", "delete", "x"]


@pytest.mark.parametrize("route", API, ids=[r[1] for r in API])
def test_api_writes_refuse_hostile_bodies_without_5xx(world, route):
    path, name, callback, _ = route
    writes = view_methods(callback) & {"POST", "PUT", "PATCH", "DELETE"}
    if not writes:
        pytest.skip(f"{name} takes no writes")
    for who, token in world["tokens"].items():
        client = api_client(token)
        for url in fill(path, world["ids"], ACTIONS):
            for method in sorted(writes):
                for what, raw in HOSTILE_BODIES.items():
                    response = getattr(client, method.lower())(
                        url, data=raw, content_type="application/json"
                    )
                    assert_one_error_shape(response, f"{who} {method} {url} with {what}")
                # A form-encoded body too: the API takes JSON only, and says so in the shape.
                response = getattr(client, method.lower())(
                    url,
                    data="team=\x00&comment=" + MB,
                    content_type="application/x-www-form-urlencoded",
                )
                assert_one_error_shape(response, f"{who} {method} {url} form-encoded")


@pytest.mark.parametrize("route", API, ids=[r[1] for r in API])
def test_api_filters_refuse_hostile_parameters_without_5xx(world, route):
    path, name, callback, _ = route
    if "GET" not in view_methods(callback):
        pytest.skip(f"{name} has no reads")
    for who, token in world["tokens"].items():
        client = api_client(token)
        for url in fill(path, world["ids"], ACTIONS):
            for param in sorted(filter_names(callback)):
                for what, value in HOSTILE_VALUES.items():
                    response = client.get(url, {param: value})
                    assert_one_error_shape(response, f"{who} GET {url}?{param}= {what}")
            response = client.get(url + "?team%00=1&%00=%00")
            assert_one_error_shape(response, f"{who} GET {url} NUL in a name")


def test_a_nul_in_a_filter_is_a_400_naming_it(world):
    response = api_client(world["tokens"]["admin"]).get("/api/v1/requests/", {"status": "a\x00"})
    assert response.status_code == 400
    assert response.json() == {
        "message": "status: query parameter must not contain NUL (\\x00) characters",
        "extra": {"field": "status", "code": "null_character"},
    }


def test_a_deeply_nested_body_is_a_400_naming_the_rule(world):
    response = api_client(world["tokens"]["lead-c"]).post(
        "/api/v1/requests/",
        data=HOSTILE_BODIES["deeply nested list"],
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["message"] == "body: JSON nested deeper than 32 levels"


def test_a_lone_surrogate_in_a_choice_field_is_a_400_naming_the_field(world):
    response = api_client(world["tokens"]["lead-c"]).post(
        "/api/v1/requests/",
        data=b'{"team": "team-c", "justification": "j", "kind": "\\ud800", "lines": []}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "kind"
    assert "lone surrogate" in response.json()["message"]


def test_the_audit_export_refuses_a_nul_before_sending_anything(world, client):
    client.force_login(world["users"]["admin"])
    response = client.get("/audit/export.csv", {"action": "x\x00"})
    assert response.status_code == 400
    assert not response.streaming
    assert response.json()["extra"]["field"] == "action"


FORM_FIELDS = [
    "team", "justification", "kind", "starts_at", "ends_at", "action", "comment", "name", "days",
    "username", "password", "next", "reject-comment", "changes-comment", "revoke-comment",
    "lines-TOTAL_FORMS", "lines-INITIAL_FORMS", "lines-MIN_NUM_FORMS", "lines-MAX_NUM_FORMS",
    "lines-0-team_namespace", "lines-0-resource", "lines-0-guarantee", "lines-0-cap",
    "lines-0-per_pod_max", "lines-0-priority_classes", "status", "waiting", "page",
]  # fmt: skip

FORM_VALUES = {
    "NUL": "a\x00b",
    "10 kB": "y" * 10_000,
    "wrong types": "[object Object]",
    "huge numbers": "9" * 400,
    "negative": "-1",
}


@pytest.mark.parametrize("route", PAGES, ids=[r[1] for r in PAGES])
def test_pages_take_hostile_form_posts_and_queries_without_5xx(world, route):
    path, _, _, _ = route
    for who, user in [("anonymous", None), *world["users"].items()]:
        for url in fill(path, world["ids"], ACTIONS):
            for what, value in FORM_VALUES.items():
                client = Client()
                if user is not None:
                    client.force_login(user)
                data = {field: value for field in FORM_FIELDS}
                data["lines-TOTAL_FORMS"] = value if what != "NUL" else "1"
                if what == "10 kB":
                    # Two 1 MB fields stay under Django's 2.5 MB body limit.
                    data.update(justification=MB, name=MB)
                response = client.post(url, data)
                assert response.status_code < 500, f"{who} POST {url} {what}"
                response = client.get(
                    url, {field: value for field in ("status", "team", "since", "action", "page")}
                )
                assert response.status_code < 500, f"{who} GET {url} {what}"


@pytest.mark.parametrize(("copies", "field"), [(1000, "lines"), (24000, "body")])
def test_a_request_of_thousands_of_lines_is_refused_before_any_line_is_looked_at(
    world, django_assert_max_num_queries, copies, field
):
    """24,000 copies of one line once held a web worker for over a minute: the body's size is
    checked before it is parsed and the list's length before its items, so the answer costs
    what an empty request costs."""
    body = request_body()
    body["lines"] = body["lines"] * copies
    client = api_client(world["tokens"]["lead-c"])
    with django_assert_max_num_queries(12):
        response = client.post("/api/v1/requests/preview/", body, format="json")
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == field
    limit = "50" if field == "lines" else str(settings.API_MAX_BODY_BYTES)
    assert limit in response.json()["message"]


@pytest.mark.parametrize(
    ("path", "extra", "field"),
    [
        ("requests/", {"lines": "many"}, "lines"),
        ("requests/preview/", {"classes": 33}, "lines[0].priority_classes"),
        ("requests/{request}/approve/", {"decisions": 51}, "decisions"),
    ],
)
def test_every_list_in_a_body_is_bounded(world, path, extra, field):
    body = request_body()
    if extra.get("lines"):
        body["lines"] = body["lines"] * 51
    if extra.get("classes"):
        body["lines"][0]["priority_classes"] = [f"class-{i}" for i in range(extra["classes"])]
    if extra.get("decisions"):
        body = {"decisions": [{"line": i, "guarantee": "1", "cap": "1"} for i in range(51)]}
    token = world["tokens"]["admin" if "approve" in path else "lead-c"]
    response = api_client(token).post("/api/v1/" + path.format(**world["ids"]), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"].startswith(field), response.json()


def test_a_body_past_the_api_limit_is_refused_unread(world, settings):
    settings.API_MAX_BODY_BYTES = 4096
    body = {**request_body(), "justification": "x" * 5000}
    response = api_client(world["tokens"]["lead-c"]).post("/api/v1/requests/", body, format="json")
    assert response.status_code == 400
    assert response.json()["extra"] == {"field": "body", "code": "too_large"}
    assert "4096 bytes" in response.json()["message"]
