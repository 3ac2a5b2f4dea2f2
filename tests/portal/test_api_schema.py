"""The API as a described contract: an OpenAPI schema with no generator warnings, its docs page
served from local files, the API root, OPTIONS, one pagination style and one error shape for
bad filters, in the API and on the pages."""

import re
from urllib.parse import unquote

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from portal.api.views import api_endpoints
from tests.support.api import as_user
from tests.support.requests import new_request

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        body = APIClient().get("/api/schema/", {"format": "json"})
    assert body.status_code == 200
    return body.json()


def test_the_schema_generates_without_a_warning(tmp_path):
    # What CI relies on: `manage.py spectacular --validate --fail-on-warn` (it raises otherwise).
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert yaml.safe_load(out.read_text())["openapi"].startswith("3.")


def test_every_api_url_is_in_the_schema_with_its_methods(schema):
    described = {(path, method.upper()) for path, ops in schema["paths"].items() for method in ops}
    listed = {(e["path"], method) for e in api_endpoints() for method in e["methods"]}
    # Both ways: the root lists no method the schema leaves out, and nothing the schema
    # describes is missing from the root (but the root itself).
    assert listed | {("/api/v1/", "GET")} == described, (listed - described, described - listed)


def test_every_operation_documents_its_errors_in_the_one_shape(schema):
    error = {"$ref": "#/components/schemas/Error"}
    assert set(schema["components"]["schemas"]["Error"]["required"]) == {"message", "extra"}
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            assert {"400", "429"} <= codes, (method, path)
            if path != "/api/v1/":
                assert "401" in codes, (method, path)
            if method != "get":
                assert "403" in codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
            for code, response in op["responses"].items():
                if code.startswith(("4", "5")):
                    assert response["content"]["application/json"]["schema"] == error
                    assert response["content"]["application/json"]["examples"]
            assert op.get("summary"), (method, path)


BODILESS_POSTS = {"requests_preview_saved"}


def test_every_body_sent_is_described_with_an_example(schema):
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if method == "post" and "requestBody" not in op:
                # A POST that takes no body (the preview of a saved request): nothing to show.
                assert op["operationId"] in BODILESS_POSTS, (method, path)
                continue
            if method in ("post", "put", "patch"):
                body = op["requestBody"]["content"]["application/json"]
                assert body["schema"]["$ref"].startswith("#/components/schemas/"), path
                assert body.get("examples"), (method, path)


def test_the_request_body_keeps_its_shape(schema):
    create = schema["components"]["schemas"]["RequestCreateRequest"]
    assert set(create["properties"]) == {
        "team",
        "justification",
        "kind",
        "starts_at",
        "ends_at",
        "lines",
        "submit",
    }
    assert set(create["required"]) == {"team", "justification", "lines"}


def test_lists_document_one_pagination_style(schema, settings):
    lists = [
        (path, op)
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if method == "get" and "Paginated" in str(op["responses"]["200"])
    ]
    assert len(lists) >= 6
    for path, op in lists:
        params = {p["name"]: p for p in op.get("parameters", [])}
        assert params["page"]["schema"]["minimum"] == 1, path
        assert params["page_size"]["schema"]["maximum"] == settings.API_MAX_PAGE_SIZE, path
        assert "limit" not in params and "offset" not in params
    envelope = schema["components"]["schemas"]["PaginatedRequestList"]
    assert set(envelope["required"]) == {"count", "next", "previous", "results"}


def test_the_docs_page_loads_swagger_ui_from_the_portal_itself(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/") for s in sources), sources
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in sources
    assert "/static/api/swagger-init.js" in sources
    assert "<style" not in html and not re.search(r"<script>[^<]", html)  # nothing inline
    assert 'data-schema-url="/api/schema/"' in html
    assert client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css")
    assert client.get("/static/api/swagger-init.js").status_code == 200


def test_the_api_root_lists_every_endpoint(client):
    body = client.get("/api/v1/").json()
    assert body["schema"].endswith("/api/schema/") and body["docs"].endswith("/api/docs/")
    paths = {e["path"]: e["methods"] for e in body["endpoints"]}
    assert paths["/api/v1/requests/"] == ["GET", "POST"]
    assert paths["/api/v1/requests/{id}/approve/"] == ["POST"]
    assert paths["/api/v1/requests/{id}/"] == ["GET", "PATCH", "DELETE"]
    assert "/api/v1/teams/{slug}/" in paths and len(paths) >= 18, paths


def test_options_says_what_to_send_and_where_the_schema_is(plan, lead_c):
    api = as_user(lead_c)
    body = api.options("/api/v1/requests/").json()
    assert body["schema"].endswith("/api/schema/")
    post = body["actions"]["POST"]
    assert {"team", "justification", "lines", "submit"} <= set(post)
    assert "status" not in post and "id" not in post  # read fields are not sent
    assert post["lines"]["child"]["children"]["cap"]["required"] is True
    approve = api.options("/api/v1/requests/1/approve/").json()
    assert set(approve["actions"]["POST"]) == {"comment", "decisions"}
    assert "actions" not in api.options("/api/v1/teams/").json()


# --- pagination -----------------------------------------------------------------------------


def test_pages_and_page_sizes(plan, admin):
    api = as_user(admin)
    first = api.get("/api/v1/allocations/", {"page_size": 2}).json()
    assert first["count"] == 3 and len(first["results"]) == 2 and first["previous"] is None
    second = api.get(first["next"]).json()
    assert [len(second["results"]), second["next"]] == [1, None]
    assert "page_size=2" in second["previous"]
    assert {r["id"] for r in first["results"] + second["results"]} == {
        r["id"] for r in api.get("/api/v1/allocations/").json()["results"]
    }


@pytest.mark.parametrize(
    ("query", "status", "field", "message"),
    [
        ({"page": "9"}, 404, "page", "page: no page 9; the last is 1"),
        ({"page": "0"}, 400, "page", "page: must be a positive integer, got '0'"),
        ({"page": "two"}, 400, "page", "page: must be a positive integer, got 'two'"),
        ({"page_size": "501"}, 400, "page_size", "page_size: at most 500, got 501"),
        ({"page_size": "-1"}, 400, "page_size", "page_size: must be a positive integer, got '-1'"),
        (
            {"limit": "2"},
            400,
            "limit",
            "limit: not supported; lists are paged with page and page_size (at most 500)",
        ),
        (
            {"offset": "2"},
            400,
            "offset",
            "offset: not supported; lists are paged with page and page_size (at most 500)",
        ),
    ],
)
def test_bad_paging_is_refused_naming_the_parameter(plan, admin, query, status, field, message):
    response = as_user(admin).get("/api/v1/teams/", query)
    assert response.status_code == status
    body = response.json()
    assert body["message"] == message and body["extra"]["field"] == field


def test_the_maximum_page_size_is_a_setting(plan, admin, settings):
    settings.API_MAX_PAGE_SIZE = 2
    api = as_user(admin)
    assert api.get("/api/v1/allocations/", {"page_size": 2}).status_code == 200
    assert api.get("/api/v1/allocations/", {"page_size": 3}).json()["extra"]["max"] == 2


# --- filters: one FilterSet for the page and the API -------------------------------------------


def test_a_bad_status_is_a_400_naming_it_not_an_empty_list(plan, admin):
    response = as_user(admin).get("/api/v1/requests/", {"status": "bogus"})
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["field"] == "status"
    assert body["message"].startswith("status: 'bogus' is not one of draft, submitted, ")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"team": "team-a"}, "team"),  # exists, but lead-c may not see it
        ({"cluster": "nowhere"}, "cluster"),
        ({"kind": "forever"}, "kind"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"waiting": "perhaps"}, "waiting"),
    ],
)
def test_request_filters_refuse_bad_values_in_the_api_and_on_the_page(
    client, plan, lead_c, query, field
):
    response = as_user(lead_c).get("/api/v1/requests/", query)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["extra"]["field"] == field and body["message"].startswith(f"{field}:")
    client.force_login(lead_c)
    page = client.get("/requests/", query)
    assert page.status_code == 400
    errors = re.findall(r'data-testid="filter-error">([^<]*)<', page.content.decode())
    assert errors and errors[0].startswith(f"{field}:")


def test_request_filters_select_the_same_rows_on_the_page_and_in_the_api(
    client, plan, gpu, lead_a, lead_c, admin
):
    mine = new_request(lead_c, plan["team-c"], gpu, 2, 5)
    theirs = new_request(lead_a, plan["team-a"], gpu, 6, 11)
    api = as_user(admin)
    client.force_login(admin)
    for query, expected in [
        ({"team": "team-c"}, {mine.pk}),
        ({"cluster": "demo", "status": "draft"}, {mine.pk, theirs.pk}),
        ({"status": "submitted"}, set()),
        ({"created_after": "2000-01-01", "kind": "permanent"}, {mine.pk, theirs.pk}),
        ({"created_before": "2000-01-01"}, set()),
    ]:
        rows = api.get("/api/v1/requests/", query).json()["results"]
        assert {r["id"] for r in rows} == expected, query
        html = client.get("/requests/", query).content.decode()
        assert {int(i) for i in re.findall(r'data-testid="request-(\d+)"', html)} == expected


def test_allocation_and_team_filters(plan, admin, lead_c):
    api = as_user(admin)
    assert api.get("/api/v1/allocations/", {"namespace": "bad name!"}).status_code == 400
    teams = api.get("/api/v1/teams/", {"cluster": "demo"}).json()["results"]
    assert [t["slug"] for t in teams] == ["team-a", "team-b", "team-c"]
    refused = api.get("/api/v1/teams/", {"cluster": "nowhere"})
    assert refused.json()["message"] == "cluster: no cluster named 'nowhere'"
    assert as_user(lead_c).get("/api/v1/teams/", {"parent": "team-a"}).status_code == 400


def test_a_path_no_endpoint_takes_is_a_json_404(plan, admin):
    # Found by the fuzzing: an id the URL does not take (-1) fell through to Django's HTML 404,
    # and a DELETE there to CSRF's HTML 403.
    # Then a line break in the path (%0A): the catch-all's "." stopped at it.
    api = as_user(admin)
    for method, path in [
        ("get", "/api/v1/requests/-1/"),
        ("delete", "/api/v1/nothing/"),
        ("post", "/api/v1/requests/1%0A/approve/"),
        ("get", "/api/v1/x%0Ay/"),
    ]:
        response = getattr(api, method)(path)
        assert response.status_code == 404
        assert response.json() == {
            "message": f"no API endpoint at {unquote(path)}; GET /api/v1/ lists them",
            "extra": {"code": "not_found"},
        }


def test_the_kept_document_is_the_same_for_everyone_and_in_each_language(admin, lead_c):
    """Each process builds the document once per language: whoever asks first, an anonymous
    visitor, a lead or an admin gets the same one, and a language never the other's."""
    anonymous, lead, platform_admin = APIClient(), as_user(lead_c), as_user(admin)
    english = anonymous.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT_LANGUAGE="en")
    chinese = lead.get("/api/schema/", {"format": "json", "lang": "zh-hans"})
    again = platform_admin.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT_LANGUAGE="en")
    by_header = anonymous.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert english.status_code == chinese.status_code == 200
    assert again.content == english.content
    assert by_header.content == chinese.content != english.content
    # Another version than the portal's is built for its request, not kept.
    odd = anonymous.get("/api/schema/", {"format": "json", "version": "9"})
    assert odd.status_code == 200 and odd.json()["info"]["version"] == "1 (9)"
    after = anonymous.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT_LANGUAGE="en")
    assert after.content == english.content
