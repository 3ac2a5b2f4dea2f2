"""The API tokens page (/tokens/): every user lists, creates and revokes their own tokens;
platform admins also see and revoke everyone's. The token is shown once, in the answer to the
POST that made it, and that page is never cached."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from common.errors import ApplicationError
from portal.tokens import NAME_MAX_LENGTH, api_token_create, api_token_revoke, api_tokens_visible_to


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=NAME_MAX_LENGTH,
        help_text=gettext_lazy("What the token is for."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The bounds are settings: made per form, not frozen at import.
        self.fields["days"] = forms.IntegerField(
            label=_("Days"),
            min_value=1,
            max_value=settings.API_TOKEN_MAX_DAYS,
            initial=settings.API_TOKEN_DEFAULT_DAYS,
            help_text=_("Days until it expires (at most %(max)s).")
            % {"max": settings.API_TOKEN_MAX_DAYS},
        )


def _page(request: HttpRequest, form: TokenCreateForm, *, created=None, status=200):
    user = request.user
    visible = api_tokens_visible_to(user).order_by("-created_at")
    context = {
        "form": form,
        "created": created,
        "own_tokens": [t for t in visible if t.user_id == user.pk],
        # Others' tokens are visible to platform admins only (api_tokens_visible_to).
        "other_tokens": [t for t in visible if t.user_id != user.pk and t.revoked_at is None],
        "now": timezone.now(),
        "max_days": settings.API_TOKEN_MAX_DAYS,
    }
    return render(request, "portal/tokens.html", context, status=status)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """GET: the tokens; POST: create one and show it this once."""
    if request.method == "GET":
        return _page(request, TokenCreateForm())
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        row, token = api_token_create(
            user=request.user, name=form.cleaned_data["name"], days=form.cleaned_data["days"]
        )
    except ApplicationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return _page(request, form, status=400)
    return _page(request, TokenCreateForm(), created={"row": row, "token": token})


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    # Another user's token does not exist for whoever may not see it.
    token = api_tokens_visible_to(request.user).filter(pk=pk).first()
    if token is None:
        raise Http404(_("Token #%(pk)s does not exist or is not yours.") % {"pk": pk})
    try:
        api_token_revoke(token=token, acting_user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("Token %(label)s (%(name)s) revoked.") % {"label": token.label, "name": token.name},
        )
    return redirect("tokens")
