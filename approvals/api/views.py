"""API views of quota requests: parse, fetch through requests_visible_to, one service, serialize.

The services decide who may act by asking the rulebook (approvals.access: leads for their
teams, admins decide, nobody decides their own request, auditors change nothing) and answer
its refusal; the views only make sure nobody acts on, or learns of, a request they cannot see
(requests_visible_to, the rulebook's restrict).
"""

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.utils.translation import gettext as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import grants, lifecycle, locks
from approvals.api.etags import request_etag, request_if_match
from approvals.api.rows import request_list_bodies, request_rows
from approvals.api.serializers import (
    APPROVALS_PREFETCHED,
    LINES_PREFETCHED,
    ApproveSerializer,
    CommentSerializer,
    RequestCreateSerializer,
    RequestSerializer,
)
from approvals.filtersets import RequestFilterSet
from approvals.lines import KEEP, Decision, LineInput
from approvals.models import Approval, QuotaRequest, RequestLine
from approvals.selectors import requests_visible_to
from common.api.idempotency import IdempotentMixin
from common.api.pagination import ApiPagination
from common.api.schema import api_errors
from common.errors import ValidationFailed
from quotas.models import Resource, Team
from quotas.selectors import namespaces_visible_to, team_scope, teams_visible_to


def _own_fields(model) -> list[str]:
    return [field.name for field in model._meta.concrete_fields]


# What a request's answer shows of the rows around it (their other columns, users' passwords
# and clusters' connection settings among them, are not read).
_REQUEST_FIELDS = [
    *_own_fields(QuotaRequest),
    "team__slug",
    "requested_by__username",
    "decided_by__username",
]
_LINE_FIELDS = [
    *_own_fields(RequestLine),
    "team_namespace__name",
    "team_namespace__cluster__name",
    "resource__name",
]
_APPROVAL_FIELDS = [*_own_fields(Approval), "admin__username"]


def _requests_for(user) -> QuerySet[QuotaRequest]:
    return (
        requests_visible_to(user)
        .select_related("team", "requested_by", "decided_by")
        .only(*_REQUEST_FIELDS)
        .prefetch_related(
            # Into plain lists (to_attr): a prefetch into the related managers builds one
            # queryset per request, which costs more than the rows of a 500-row page.
            Prefetch(
                "lines",
                queryset=RequestLine.objects.select_related("team_namespace__cluster", "resource")
                .only(*_LINE_FIELDS)
                .order_by("id"),
                to_attr=LINES_PREFETCHED,
            ),
            Prefetch(
                "approvals",
                queryset=Approval.objects.select_related("admin")
                .only(*_APPROVAL_FIELDS)
                .order_by("request_id", "created_at", "id"),
                to_attr=APPROVALS_PREFETCHED,
            ),
        )
        .order_by("-created_at", "-id")
    )


def _visible_request(user, pk: int) -> QuotaRequest:
    found = _requests_for(user).filter(pk=pk).first()
    if found is None:
        raise NotFound(_("request #%(id)s does not exist or is not visible to you") % {"id": pk})
    return found


def _team(user, slug: str) -> Team:
    team = teams_visible_to(user).filter(slug=slug).first()
    if team is None:
        raise ValidationFailed(
            _("team: unknown team %(team)s") % {"team": repr(slug)}, field="team"
        )
    return team


def _line_inputs(user, lines: list[dict]) -> list[LineInput]:
    """Names (cluster, namespace, resource) to ids, among the namespaces the user sees."""
    namespaces = namespaces_visible_to(user)
    inputs = []
    for index, line in enumerate(lines):
        where = f"lines[{index}]"
        ns = namespaces.filter(cluster__name=line["cluster"], name=line["namespace"]).first()
        if ns is None:
            raise ValidationFailed(
                _("%(field)s: unknown namespace %(namespace)s on cluster %(cluster)s")
                % {
                    "field": f"{where}.namespace",
                    "namespace": repr(line["namespace"]),
                    "cluster": repr(line["cluster"]),
                },
                field=f"{where}.namespace",
            )
        resource = Resource.objects.filter(name=line["resource"]).first()
        if resource is None:
            raise ValidationFailed(
                _("%(field)s: unknown resource %(resource)s")
                % {"field": f"{where}.resource", "resource": repr(line["resource"])},
                field=f"{where}.resource",
            )
        inputs.append(
            LineInput(
                team_namespace_id=ns.pk,
                resource_id=resource.pk,
                guarantee=line["guarantee"],
                cap=line["cap"],
                # A field left out keeps its value; null / [] remove it.
                per_pod_max=line.get("per_pod_max", KEEP),
                priority_classes=(
                    tuple(line["priority_classes"]) if "priority_classes" in line else KEEP
                ),
            )
        )
    return inputs


CREATE_EXAMPLE = OpenApiExample(
    "two more GPUs for team-a, submitted at once",
    request_only=True,
    value={
        "team": "team-a",
        "justification": "Two more A100 for the March training run",
        "lines": [
            {
                "cluster": "demo",
                "namespace": "team-a-training",
                "resource": "nvidia.com/gpu",
                "guarantee": "8",
                "cap": "12",
            }
        ],
        "submit": True,
    },
)


class RequestFilterBackend(DjangoFilterBackend):
    """The request list's filters, ?team= choosing from the teams the view read already."""

    def get_filterset_kwargs(self, request, queryset, view) -> dict:
        kwargs = super().get_filterset_kwargs(request, queryset, view)
        scope = getattr(view, "scope", None)
        return kwargs if scope is None else {**kwargs, "teams": scope.teams_visible()}


@extend_schema_view(
    get=extend_schema(summary="List quota requests", tags=["requests"]),
    post=extend_schema(
        summary="Create a quota request (a draft, or submitted with submit: true)",
        tags=["requests"],
        request=RequestCreateSerializer,
        responses={201: RequestSerializer, **api_errors(403, 409)},
        examples=[CREATE_EXAMPLE],
    ),
)
class RequestList(IdempotentMixin, generics.ListCreateAPIView):
    """GET: the requests you may see, newest first. POST: create a draft, or with
    "submit": true create and submit it in one step (refused: nothing is created)."""

    serializer_class = RequestSerializer
    pagination_class = ApiPagination
    filterset_class = RequestFilterSet
    filter_backends = [RequestFilterBackend]
    queryset = QuotaRequest.objects.none()
    request_serializers = {"POST": RequestCreateSerializer}

    def list(self, request: Request, *args, **kwargs) -> Response:
        # The user's teams, read once for the rows and the ?team= filter's choices.
        self.scope = team_scope(request.user)
        # Written from rows (approvals/api/rows.py): each row as RequestSerializer answers the
        # request alone, without a model graph per page.
        visible = requests_visible_to(request.user, scope=self.scope).order_by("-created_at", "-id")
        page = self.paginator.paginate_rows(self.filter_queryset(visible), request, request_rows)
        return self.get_paginated_response(request_list_bodies(page))

    def create(self, request: Request, *args, **kwargs) -> Response:
        form = RequestCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        user = request.user
        created = lifecycle.request_create(
            team=_team(user, data["team"]),
            acting_user=user,
            justification=data["justification"],
            lines=_line_inputs(user, data["lines"]),
            kind=data["kind"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            submit=data["submit"],
        )
        body = RequestSerializer(_visible_request(user, created.pk)).data
        return Response(body, status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(summary="Read a quota request", tags=["requests"]),
    delete=extend_schema(
        summary="Delete a draft (its requester only)",
        tags=["requests"],
        responses={204: None, **api_errors(403, 409)},
    ),
)
class RequestDetail(generics.RetrieveDestroyAPIView):
    """GET a request; DELETE a draft (its requester only; audited)."""

    serializer_class = RequestSerializer
    queryset = QuotaRequest.objects.none()

    def get_object(self):
        return _visible_request(self.request.user, self.kwargs["pk"])

    def destroy(self, request: Request, *args, **kwargs) -> Response:
        lifecycle.request_delete(request=self.get_object(), acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _submit(qr, user, data):
    return lifecycle.request_submit(request=qr, acting_user=user)


def _withdraw(qr, user, data):
    return lifecycle.request_withdraw(request=qr, acting_user=user, comment=data["comment"])


def _approve(qr, user, data):
    decisions = [
        Decision(
            line_id=d["line"],
            guarantee=d["guarantee"],
            cap=d["cap"],
            per_pod_max=d.get("per_pod_max", KEEP),
            priority_classes=(
                tuple(d["priority_classes"]) if d.get("priority_classes") is not None else None
            ),
        )
        for d in data["decisions"]
    ]
    return lifecycle.request_approve(
        request=qr, acting_user=user, comment=data["comment"], decisions=decisions
    )


def _rebase(qr, user, data):
    return lifecycle.request_rebase(request=qr, acting_user=user)


def _revoke(qr, user, data):
    return grants.request_revoke(request=qr, acting_user=user, comment=data["comment"])


def _reject(qr, user, data):
    return lifecycle.request_reject(request=qr, acting_user=user, comment=data["comment"])


def _changes(qr, user, data):
    return lifecycle.request_changes(request=qr, acting_user=user, comment=data["comment"])


ACTIONS = {
    # action: (body, service, summary, what the description adds)
    "submit": (
        CommentSerializer,
        _submit,
        "Submit a draft or a revised request",
        "Checked against the whole plan; what the cluster's policy allows is approved at once. "
        "Plan errors are a 400 listing every finding under `extra.errors`.",
    ),
    "withdraw": (
        CommentSerializer,
        _withdraw,
        "Withdraw a request (its requester)",
        "Drafts, waiting, sent-back and approved requests not yet applied.",
    ),
    "approve": (
        ApproveSerializer,
        _approve,
        "Approve a submitted request (platform admins, not their own)",
        "`decisions` change a line's amounts; the last approval needed applies it.",
    ),
    "reject": (
        CommentSerializer,
        _reject,
        "Reject a submitted request (platform admins; comment required)",
        "",
    ),
    "changes": (
        CommentSerializer,
        _changes,
        "Send a submitted request back for changes (platform admins; comment required)",
        "",
    ),
    "rebase": (
        CommentSerializer,
        _rebase,
        "Rebase a request on the current allocations",
        "Values the request did not change follow the allocation; decided values and "
        "approvals are dropped and a waiting request is checked again as on submit.",
    ),
    "revoke": (
        CommentSerializer,
        _revoke,
        "Revoke an approved temporary grant before it starts (platform admins; comment required)",
        "",
    ),
}

APPROVE_EXAMPLE = OpenApiExample(
    "approve with a smaller cap on one line",
    request_only=True,
    value={
        "comment": "cap 10 is enough for now",
        "decisions": [{"line": 17, "guarantee": "8", "cap": "10"}],
    },
)
COMMENT_EXAMPLE = OpenApiExample(
    "a comment", request_only=True, value={"comment": "split the request per namespace"}
)


class RequestAction(IdempotentMixin, APIView):
    """POST /requests/<id>/<action>/: one transition, answered with the request and its ETag.

    One subclass per action (``ACTION_VIEWS``), so each has its own body in the schema. The
    decisions (approve, reject, changes) honour ``If-Match``: a stale tag is a 412."""

    action = ""
    actions = {name: (body, service) for name, (body, service, _, _) in ACTIONS.items()}

    @property
    def request_serializers(self) -> dict:
        return {"POST": self.actions[self.action][0]}

    @property
    def if_match(self) -> bool:
        return self.action in IF_MATCH_ACTIONS

    def post(self, request: Request, pk: int) -> Response:
        form_class, service = self.actions[self.action]
        form = form_class(data=request.data)
        form.is_valid(raise_exception=True)
        qr = _visible_request(request.user, pk)
        header = request.headers.get("If-Match")
        if self.if_match and header is not None:
            with transaction.atomic():
                # Checked with the request locked in the services' lock order, so nothing
                # changes it between the check and the decision.
                locks.request_lock(request=qr, for_approval=self.action == "approve")
                request_if_match(request_id=pk, header=header)
                service(qr, request.user, form.validated_data)
        else:
            service(qr, request.user, form.validated_data)
        response = Response(RequestSerializer(_visible_request(request.user, pk)).data)
        response["ETag"] = request_etag(pk)
        return response


# Decisions a stale page must not make: If-Match is honoured on these (and on revise).
IF_MATCH_ACTIONS = frozenset({"approve", "reject", "changes"})


def _action_view(action: str) -> type[RequestAction]:
    body, _, summary, description = ACTIONS[action]
    schema = extend_schema(
        summary=summary,
        description=description or None,
        tags=["requests"],
        request=body,
        responses={
            200: RequestSerializer,
            **api_errors(*((403, 409, 412) if action in IF_MATCH_ACTIONS else (403, 409))),
        },
        examples=[APPROVE_EXAMPLE if action == "approve" else COMMENT_EXAMPLE],
    )
    name = f"Request{action.capitalize()}"
    return extend_schema_view(post=schema)(type(name, (RequestAction,), {"action": action}))


ACTION_VIEWS = {action: _action_view(action) for action in ACTIONS}
