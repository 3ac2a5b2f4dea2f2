"""The button of the suggestions page: POST /requests/from-suggestion/<id>/ turns a suggestion
into a draft or a submitted request, then shows that request (or the one made from it
already)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from approvals.selectors import requests_visible_to
from approvals.suggestions import request_from_suggestion
from common.errors import ApplicationError, PermissionDenied
from quotas.usage.suggestion_selectors import suggestions_visible_to


@login_required
@require_POST
def suggestion_request(request: HttpRequest, pk: int) -> HttpResponse:
    suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
    if suggestion is None:
        raise Http404(_("no such suggestion"))
    submit = request.POST.get("submit") == "1"
    try:
        qr = request_from_suggestion(suggestion=suggestion, acting_user=request.user, submit=submit)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        # Refused (a rule the plan breaks now, or already requested): nothing was made.
        messages.error(request, _("not requested: %(problem)s") % {"problem": exc.message})
        earlier = exc.extra.get("request")
        if earlier and requests_visible_to(request.user).filter(pk=earlier).exists():
            return redirect("requests-detail", pk=earlier)
        return redirect("suggestions-list")
    if submit:
        done = _("Request #%(id)s submitted from the suggestion.")
    else:
        done = _("Request #%(id)s saved as a draft from the suggestion.")
    messages.success(request, done % {"id": qr.pk})
    return redirect("requests-detail", pk=qr.pk)
