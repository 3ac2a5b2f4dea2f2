"""URL map of the portal."""

from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy

from approvals.views.suggestions import suggestion_list
from overview.views import clusters as overview_views
from overview.views.home import home
from overview.views.summary import summary
from overview.views.waiting import team_waiting
from portal import favicon, health, token_views
from portal.api.views import ApiDocs, ApiSchema
from portal.sso import views as sso_views
from quotas.audit.views import audit_export_csv, audit_log
from usage.views import showback_export_csv, showback_page, usage_export_csv, usage_page

admin.site.site_header = gettext_lazy("GPU quota portal — administration")
admin.site.site_title = gettext_lazy("GPU quota portal")

urlpatterns = [
    path("", home, name="home"),
    path("clusters/", overview_views.cluster_list, name="clusters"),
    path("clusters/<slug:name>/", overview_views.cluster_detail, name="cluster-detail"),
    path("summary/", summary, name="summary"),
    path("waiting/<slug:slug>/", team_waiting, name="team-waiting"),
    path("login/", sso_views.LoginView.as_view(), name="login"),
    path("logout/", sso_views.logout, name="logout"),
    path("sso/login/", sso_views.SsoStart.as_view(), name="sso-login"),
    path("sso/callback/", sso_views.SsoCallback.as_view(), name="sso-callback"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("favicon.ico", favicon.favicon, name="favicon"),
    # The language switch of the header posts to set_language (/i18n/setlang/).
    path("i18n/", include("django.conf.urls.i18n")),
    path("tokens/", token_views.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", token_views.token_revoke, name="tokens-revoke"),
    path("requests/", include("approvals.urls")),
    path("suggestions/", suggestion_list, name="suggestions-list"),
    path("usage/", usage_page, name="usage"),
    path("usage/export.csv", usage_export_csv, name="usage-export"),
    path("showback/", showback_page, name="showback"),
    path("showback/export.csv", showback_export_csv, name="showback-export"),
    path("audit/", audit_log, name="audit-log"),
    path("audit/export.csv", audit_export_csv, name="audit-export"),
    # Before the admin's own: with PASSWORD_LOGIN off its login is the portal's.
    path("admin/login/", sso_views.admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", ApiSchema.as_view(), name="api-schema"),
    path("api/docs/", ApiDocs.as_view(), name="api-docs"),
]

# Refused and unknown addresses in the portal's frame, with the reason (portal/error_pages.py).
handler400 = "portal.error_pages.bad_request"
handler403 = "portal.error_pages.permission_denied"
handler404 = "portal.error_pages.page_not_found"
