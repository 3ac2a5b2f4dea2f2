"""Schema fuzzing: schemathesis generates requests for every operation of the live schema
(/api/schema/ of the running portal, through its WSGI app) as a platform admin and as a team
lead, valid and invalid ones, against a world with requests in several states and suggestions.
No answer may be a 5xx, and every answer must be one the schema documents: its status code, its
content type and its body.

Derandomized (a fixed seed per operation), so a CI run is reproducible; bounded by
EXAMPLES_PER_OPERATION (at least 1,000 requests in all, about a minute on 2 cores).
"""

from datetime import date, timedelta
from decimal import Decimal

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from approvals.lifecycle import request_submit
from portal.tokens import api_token_create
from tests.support.requests import new_request
from usage.models import Suggestion

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 16  # per user and generation mode: 22 operations x 2 x 2 x 16
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture
def wsgi_in_the_test_transaction():
    """The WSGI app answering inside the test's transaction: Django closes the connection at
    the start and end of each request (close_old_connections), which would end it; its own
    test client unhooks the same signals."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def world(plan, gpu, cluster, lead_c, lead_a, admin, admin2, strict_policy, settings):
    """Requests in several states (drafts, waiting ones) and a suggestion, ids to aim at, and
    the tokens of an admin and of team C's lead; throttles out of the way."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": None, "address": None, "token_failure": None},
    }
    drafts = [
        new_request(lead_c, plan["team-c"], gpu, 2, 5),
        new_request(lead_a, plan["team-a"], gpu, 6, 11),
    ]
    waiting = new_request(lead_c, plan["team-c"], gpu, 3, 4)
    request_submit(request=waiting, acting_user=lead_c)
    suggestion = Suggestion.objects.create(
        cluster=cluster,
        team_namespace=plan["team-c"],
        resource=gpu,
        month=date.today().replace(day=1) - timedelta(days=1),
        current_guarantee=Decimal(2),
        current_cap=Decimal(4),
        suggested_guarantee=Decimal(3),
        suggested_cap=Decimal(5),
        confidence="high",
        flags=[],
        notes=[],
        figures={"days_of_data": 30},
        computed_at=timezone.now(),
    )
    return {
        "tokens": {u.username: api_token_create(user=u, name="fuzz")[1] for u in (admin2, lead_c)},
        "ids": [*(d.pk for d in drafts), waiting.pk, suggestion.pk],
        "slugs": ["team-a", "team-c"],
    }


def test_no_generated_request_gets_a_5xx_or_an_undocumented_answer(
    wsgi_in_the_test_transaction, world
):
    app = wsgi_in_the_test_transaction
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    sent = {"count": 0}

    def run(operation, mode, token):
        strategy = operation.as_strategy(generation_mode=mode)

        @seed(20261130)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=["explicit", "generate"],  # no shrinking: a failure reports its first case
        )
        @given(case=strategy, data=st.data())
        def fuzz(case, data):
            # Valid requests aim at objects that exist half the time (random ids mostly find
            # nothing); invalid ones keep their invalid ids.
            for name in (case.path_parameters or {}) if mode is GenerationMode.POSITIVE else ():
                pool = world["slugs"] if name == "slug" else world["ids"]
                if data.draw(st.booleans()):
                    case.path_parameters[name] = data.draw(st.sampled_from(pool))
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            sent["count"] += 1
            case.validate_response(response, checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:
            # Nothing to make invalid: an operation with no parameters and no body.
            assert mode is GenerationMode.NEGATIVE and operation.path == "/api/v1/", operation

    failures = []
    for who, token in world["tokens"].items():
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                try:
                    run(operation, mode, token)
                except (Exception, BaseExceptionGroup) as exc:  # report every failing operation
                    failures.append(f"{who} {operation.label} {mode.value}:\n{exc}")
    assert not failures, "\n\n".join(failures)
    assert sent["count"] >= 1000, sent
