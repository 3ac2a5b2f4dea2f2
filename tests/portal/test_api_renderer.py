"""The API's JSON renderer (portal/api/renderers.py) writes DRF's JSONRenderer's bytes: the
same escapes, moments, decimals, lazy texts and key order, and DRF's own answer when it is
indented. Numbers below 1e-4 are the one spelling of its own (2.5e-05 as 0.000025): the same
number. The list the renderer was written for is held to DRF's bytes in
tests/approvals/test_api_list_rows.py."""

import datetime as dt
import json
import uuid
import zoneinfo
from collections import OrderedDict
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils.translation import gettext_lazy, override
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from portal.api.renderers import ApiJSONRenderer

SHANGHAI = zoneinfo.ZoneInfo("Asia/Shanghai")


def _every_kind() -> dict:
    return {
        "text": "".join(chr(c) for c in range(128)) + "é 配额 \U0001f680 \u2028 \u2029 \ufeff",
        "only separators": "\u2028\u2029",
        "numbers": [0, -1, 2**63, -(2**63), 0.5, 1.0, 100.0, 1e16, 123456.789, -0.0],
        "flags": [True, False, None],
        "moments": {
            "utc": dt.datetime(2026, 12, 7, 9, 30, 15, tzinfo=dt.UTC),
            "utc micro": dt.datetime(2026, 12, 7, 9, 30, 15, 120, tzinfo=dt.UTC),
            "shanghai": dt.datetime(2026, 12, 7, 17, 30, tzinfo=SHANGHAI),
            "naive": dt.datetime(2026, 12, 7, 9, 30),
            "day": dt.date(2026, 2, 28),
            "time": dt.time(23, 59, 1),
            "span": dt.timedelta(hours=1, seconds=1.5),
        },
        "decimals": [Decimal(0), Decimal("2"), Decimal("0.5"), Decimal("12.375")],
        "lazy": gettext_lazy("Quota requests"),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        1: "an integer key",
        "tuple": (1, "two", (3,)),
        "ordered": OrderedDict([("z", 1), ("a", 2)]),
        "serializer data": ReturnDict(
            {"b": [1], "a": ReturnList([{}], serializer=None)}, serializer=None
        ),
        "generator": (n * n for n in range(3)),
        "empty": [{}, [], ""],
        "nested": {"a": {"b": {"c": [[[["deep"]]]]}}},
    }


def _both(make, **kwargs) -> tuple[bytes, bytes]:
    """Each renderer's bytes of a fresh copy of the data (generators are read once)."""
    return JSONRenderer().render(make(), **kwargs), ApiJSONRenderer().render(make(), **kwargs)


def test_the_same_bytes_as_drfs_renderer_for_every_kind_of_value():
    drf, ours = _both(_every_kind)
    assert ours == drf
    # The escapes that matter are there (the test would not notice a renderer that drops
    # them both): U+2028/2029 escaped, "Z" for UTC, decimals as numbers, a lazy text as text.
    assert b"\\u2028\\u2029" in ours and "\u2028".encode() not in ours
    written = json.loads(ours)
    assert written["moments"]["utc"] == "2026-12-07T09:30:15Z"
    assert written["moments"]["shanghai"] == "2026-12-07T17:30:00+08:00"
    assert written["decimals"] == [0.0, 2.0, 0.5, 12.375]
    assert written["1"] == "an integer key"


def test_integers_beyond_64_bits_are_written_by_drf():
    drf, ours = _both(lambda: {**_every_kind(), "big": [10**30, -(2**64)]})
    assert ours == drf
    assert json.loads(ours)["big"] == [10**30, -(2**64)]


def test_lazy_texts_are_written_in_the_active_language():
    with override("zh-hans"):
        drf, ours = _both(lambda: {"title": gettext_lazy("Quota requests")})
    assert ours == drf
    assert json.loads(ours)["title"] != "Quota requests"


@pytest.mark.parametrize("value", [2.5e-05, 1e-07, 1.2345e-10, 9.99e-05])
def test_numbers_below_a_ten_thousandth_are_the_same_number(value):
    drf, ours = _both(lambda: {"ratio": value})
    assert json.loads(ours) == json.loads(drf) == {"ratio": value}


@pytest.mark.parametrize("accepted", ["application/json; indent=4", "application/json; indent=2"])
def test_an_indented_answer_is_drfs(accepted):
    drf, ours = _both(_every_kind, accepted_media_type=accepted)
    assert ours == drf
    assert b"\n    " in ours if accepted.endswith("4") else b"\n  " in ours


def test_nothing_is_written_for_no_data():
    assert ApiJSONRenderer().render(None) == b""


def test_what_neither_can_write_is_refused_alike():
    for bad in ({"lone surrogate": "\ud800"}, {"object": object()}):
        with pytest.raises((TypeError, ValueError)):
            JSONRenderer().render(bad)
        with pytest.raises((TypeError, ValueError)):
            ApiJSONRenderer().render(bad)


@pytest.mark.django_db
def test_api_answers_are_written_by_it(client):
    user = User.objects.create_user("reader", password="a long password 1")
    client.force_login(user)
    # An answer in the API's error shape (lazy texts) and a list: both through the renderer.
    answer = client.get("/api/v1/requests/?page_size=0", HTTP_ACCEPT="application/json")
    assert answer.status_code == 400
    assert type(answer.accepted_renderer) is ApiJSONRenderer
    assert answer.content == JSONRenderer().render(answer.data)
    listed = client.get("/api/v1/requests/", HTTP_ACCEPT="application/json")
    assert listed.status_code == 200
    assert type(listed.accepted_renderer) is ApiJSONRenderer
