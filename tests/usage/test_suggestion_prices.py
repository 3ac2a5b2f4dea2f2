"""A cluster's suggestion prices: set by platform admins only, audited, refused when not above
zero (naming the field), shown by the API, and read by the suggestions as a Prices."""

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from common.errors import ValidationFailed
from quotas.clusters import cluster_save
from quotas.models import AuditEvent, Cluster
from tests.support.api import as_user
from usage.forecast import Prices

D = Decimal


@pytest.mark.django_db
def test_a_cluster_starts_with_the_documented_prices_and_reads_them_as_prices(cluster):
    assert Prices.of_cluster(cluster) == Prices(
        idle=D(1), borrowed=D("0.5"), inference_borrowed=D(2), blocked=D(4)
    )


@pytest.mark.django_db
def test_a_change_of_prices_is_audited_and_a_price_not_above_zero_refused(cluster, admin):
    cluster.suggest_borrowed_price = D("0.75")
    cluster_save(cluster=cluster, acting_user=admin)
    event = AuditEvent.objects.filter(action="cluster.changed").latest("seq")
    assert (event.before["suggest_borrowed_price"], event.after["suggest_borrowed_price"]) == (
        "0.5",
        "0.75",
    )
    assert event.actor_id == admin.pk
    cluster.suggest_idle_price = D(0)
    with pytest.raises(ValidationFailed) as refused:
        cluster_save(cluster=cluster, acting_user=admin)
    assert refused.value.extra["field"] == "suggest_idle_price"
    with pytest.raises(IntegrityError), transaction.atomic():
        Cluster.objects.filter(pk=cluster.pk).update(suggest_blocked_price=D(-1))


@pytest.mark.django_db
def test_the_api_shows_the_prices_and_only_admins_change_them(cluster, admin, lead_a, client):
    # The clusters' API is the overview's: admins and auditors, never a lead.
    assert as_user(lead_a).get("/api/v1/clusters/demo/").status_code == 403
    answer = as_user(admin).get("/api/v1/clusters/demo/").json()
    assert answer["suggestion_prices"] == {
        "idle": "1",
        "borrowed": "0.5",
        "inference_borrowed": "2",
        "blocked": "4",
    }
    schema = as_user(admin).get("/api/schema/", {"format": "json"}).json()
    assert "suggestion_prices" in schema["components"]["schemas"]["Cluster"]["properties"]
    refused = as_user(admin).patch(
        "/api/v1/clusters/demo/", {"suggestion_prices": {"idle": "9"}}, format="json"
    )
    assert refused.status_code == 405  # read-only: prices change in the admin, audited
    client.force_login(lead_a)
    change = reverse("admin:quotas_cluster_change", args=[cluster.pk])
    assert client.get(change).status_code in (302, 403)
    client.force_login(admin)
    page = client.get(change).content.decode()
    assert 'name="suggest_inference_borrowed_price"' in page
    cluster.refresh_from_db()
    assert cluster.suggest_idle_price == 1
