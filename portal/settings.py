"""Settings of the portal, all read from the environment (see .env.example).

With nothing set the portal runs on a bare machine: SQLite in ``var/``, a file-based Celery broker
in ``var/celery/`` and the sandbox Kubernetes API. ``DATABASE_URL`` and ``CELERY_BROKER_URL``
switch to PostgreSQL and Redis.
"""

import datetime
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from common.private_files import private_dir, private_file

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("PORTAL_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# The fallback key only serves the local demo; production sets DJANGO_SECRET_KEY (checked by
# `manage.py check --deploy`).
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-local-demo-key-change-me-" + "x" * 20)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "common",
    "portal",
    "quotas",
    "usage",
    "approvals",
    "overview",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.ContentSecurityPolicyMiddleware",
    "portal.middleware.RejectHostileParametersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language: the language cookie (set by the header's switch), else Accept-Language,
    # else LANGUAGE_CODE. After sessions, before CommonMiddleware, as Django asks.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # With PASSWORD_LOGIN off, a session a password opened ends here (portal/sso/).
    "portal.sso.middleware.PasswordSessionsEndMiddleware",
    "portal.middleware.UserGroupsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a lockout found during login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

# Both template engines' pages see the same: the user, their roles, messages, the workers.
CONTEXT_PROCESSORS = [
    "django.template.context_processors.request",
    "django.template.context_processors.i18n",
    "django.contrib.auth.context_processors.auth",
    "django.contrib.messages.context_processors.messages",
    "portal.context_processors.roles",
    "portal.context_processors.workers",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": CONTEXT_PROCESSORS,
            "builtins": ["common.amounts"],
        },
    },
    # The heaviest tables, in jinja2/ (portal/jinja2.py says what their templates may use),
    # rendered by the view into the page's Django template.
    {
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {
            "environment": "portal.jinja2.environment",
            "context_processors": CONTEXT_PROCESSORS,
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"),
}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # It holds session keys and API token digests: owner-only before SQLite first writes it
    # (its journal files take the database file's mode).
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        private_file(Path(DATABASES["default"]["NAME"]))
    # The demo runs web, worker and beat against one file: wait for locks instead of failing.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- Languages ------------------------------------------------------------------------------------
# English and Simplified Chinese. The browser's Accept-Language picks one, the header's switch
# overrides it (a cookie); everything else (no header, another language) gets the default, which
# is also the language of e-mails and of work done outside a request (Celery tasks, commands).
# The API answers in the same language (Accept-Language); machine-readable codes (rule, field,
# level, status) never change with it. Catalogues: locale/ (`make messages`).
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LANGUAGE_CODE = env.str("PORTAL_DEFAULT_LANGUAGE", default="en")
if LANGUAGE_CODE not in dict(LANGUAGES):
    raise ImproperlyConfigured(
        f"PORTAL_DEFAULT_LANGUAGE must be one of {', '.join(dict(LANGUAGES))}, "
        f"got {LANGUAGE_CODE!r}"
    )
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
TIME_ZONE = env.str("PORTAL_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env.str("PORTAL_STATIC_ROOT", default="") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
# plotly.js comes from the pinned plotly package (vendor/plotly.min.js), never from a CDN.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "portal.staticfiles.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env.bool("PORTAL_MANIFEST_STATIC", default=False)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}


# --- Celery -------------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
CELERY_BROKER_FOLDER = Path(env.str("CELERY_BROKER_FOLDER", default=str(VAR_DIR / "celery")))
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FOLDER / "queue"),
        "data_folder_out": str(CELERY_BROKER_FOLDER / "queue"),
        "processed_folder": str(CELERY_BROKER_FOLDER / "processed"),
        "control_folder": str(CELERY_BROKER_FOLDER / "control"),
        "store_processed": False,
    }
    # Task messages and results, owner-only like the rest of the demo's data.
    private_dir(CELERY_BROKER_FOLDER)
    for _folder in ("queue", "processed", "results", "control"):
        private_dir(CELERY_BROKER_FOLDER / _folder)
    CELERY_RESULT_BACKEND = env.str(
        "CELERY_RESULT_BACKEND", default=f"file://{CELERY_BROKER_FOLDER / 'results'}"
    )
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=CELERY_BROKER_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Seconds /readyz waits for the broker before it reports it unreachable.
READYZ_BROKER_TIMEOUT = env.float("READYZ_BROKER_TIMEOUT", default=3.0)

# --- Quota rules and clusters -------------------------------------------------------------------
# Default share of a cluster's capacity one namespace's cap may reach; clusters may override it.
QUOTA_DEFAULT_MAX_CAP_SHARE = env.float("QUOTA_DEFAULT_MAX_CAP_SHARE", default=0.5)
# Default share of each resource's capacity that namespaces allowed the highest priority class
# may be guaranteed (empty: no limit); clusters may set their own.
QUOTA_DEFAULT_TOP_PRIORITY_SHARE = (
    env.float("QUOTA_DEFAULT_TOP_PRIORITY_SHARE")
    if env.str("QUOTA_DEFAULT_TOP_PRIORITY_SHARE", default="")
    else None
)
# The currency of the clusters' GPU-hour prices (an ISO 4217 code), shown beside every cost.
QUOTA_CURRENCY = env.str("QUOTA_CURRENCY", default="USD")
# Kubernetes API of the sandbox cluster (the demo and tests); `make run` starts it on this URL.
KUBE_SANDBOX_URL = env.str("KUBE_SANDBOX_URL", default="http://127.0.0.1:8001")
# Real schemas of every object the portal writes (Kubernetes, Volcano, Kueue).
KUBE_SCHEMA_DIR = env.str("KUBE_SCHEMA_DIR", default="")
# Value of app.kubernetes.io/managed-by on every object the portal writes.
KUBE_MANAGED_BY = env.str("KUBE_MANAGED_BY", default="gpu-quota-portal")

REST_FRAMEWORK = {
    # Tokens first: their WWW-Authenticate header makes missing credentials a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    # JSON only, parsed with limits (depth, lone surrogates, NUL) that give 400, never 500.
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.StrictJSONParser"],
    # DRF's JSON written by orjson (portal/api/renderers.py); the browsable API as DRF's.
    "DEFAULT_RENDERER_CLASSES": [
        "portal.api.renderers.ApiJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.api.throttling.TokenRateThrottle",
        "portal.api.throttling.AddressRateThrottle",
    ],
    # Rates are set in the security block below, from the environment.
    "DEFAULT_THROTTLE_RATES": {},
    # One page style for every list (?page=&page_size=), FilterSets for every filter, one schema.
    "DEFAULT_PAGINATION_CLASS": "common.api.pagination.ApiPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.PortalAutoSchema",
    "DEFAULT_METADATA_CLASS": "portal.api.metadata.ApiMetadata",
}
# Largest page_size an API list accepts (more is a 400 naming page_size).
API_MAX_PAGE_SIZE = env.int("API_MAX_PAGE_SIZE", default=500)

# The OpenAPI schema (/api/schema/) and its docs page (/api/docs/, Swagger UI from the pinned
# sidecar package's static files: no CDN). Both are public: they describe the API, not its data.
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU quota portal API",
    "DESCRIPTION": (
        "Request GPU quota, decide it and follow it to the clusters. Authenticate with a personal "
        "token (`Authorization: Bearer gqp_...`, made on /tokens/). Every failure answers "
        '`{"message", "extra"}` (the `Error` schema); lists are paged with `page` and '
        "`page_size` and answer `{count, next, previous, results}`."
    ),
    "VERSION": "1",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True},
    # Fields named "status" with different choices: each its own enum, named after its model.
    "ENUM_NAME_OVERRIDES": {
        "RequestStatusEnum": "approvals.models.QuotaRequest.Status",
        "SyncRunStatusEnum": "quotas.models.SyncRun.Status",
    },
}

# Public address of the portal, for links in notifications.
PORTAL_BASE_URL = env.str("PORTAL_BASE_URL", default="http://127.0.0.1:8000")

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gpu-quota-portal@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"refusals": {"()": "portal.logs.RefusalsWithoutTraceback"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["refusals"]}
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Start-up chatter of every process: django-axes' version, and kombu's file broker
        # saying it has no host name (it needs none).
        "axes.apps": {"level": "WARNING"},
        "kombu.connection": {"level": "ERROR"},
    },
}

# Serve static files straight from the app folders (the demo); the image runs collectstatic.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)

# --- Cluster sync ---------------------------------------------------------------------------
# Every this many seconds each cluster is compared with its desired state (drift check).
SYNC_RECONCILE_SECONDS = env.int("SYNC_RECONCILE_SECONDS", default=300)
# Seconds a sync holds a cluster's lease without renewing it (a dead worker blocks no longer).
SYNC_LEASE_SECONDS = env.int("SYNC_LEASE_SECONDS", default=120)
# Timeout of one request to a Kubernetes API server, in seconds.
KUBE_REQUEST_TIMEOUT = env.float("KUBE_REQUEST_TIMEOUT", default=15.0)
# A pending sync older than this was probably lost (dead worker, lost message): re-drive it.
SYNC_PENDING_REDRIVE_SECONDS = env.int("SYNC_PENDING_REDRIVE_SECONDS", default=60)
# Writes a sync sends to one API server at the same time (independent objects of one kind only;
# hierarchies and deletes go one by one). 1 writes strictly one after another.
SYNC_CONCURRENCY = env.int("SYNC_CONCURRENCY", default=4)

# --- Notifications ------------------------------------------------------------------------------
# URLs that receive every quota request event as a signed JSON POST (comma-separated).
WEBHOOK_URLS = env.list("WEBHOOK_URLS", default=[])
# Shared secret of the X-Portal-Signature HMAC. Without it no webhook is sent (an error is logged).
WEBHOOK_SECRET = env.str("WEBHOOK_SECRET", default="")
# Timeout of one webhook request, in seconds.
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=5.0)

# --- Usage ----------------------------------------------------------------------------------------
# Seconds between two readings of every cluster's pods (and its Prometheus, when it has one).
USAGE_COLLECT_SECONDS = env.int("USAGE_COLLECT_SECONDS", default=300)
# Seconds between two daily-rollup runs (each also prunes raw samples past the retention).
USAGE_ROLLUP_SECONDS = env.int("USAGE_ROLLUP_SECONDS", default=3600)
# Days raw usage samples are kept; daily rollups are kept for good.
USAGE_RETENTION_DAYS = env.int("USAGE_RETENTION_DAYS", default=400)
# PostgreSQL connections a rollup of several days uses side by side, each computing a part of
# the days (the database runs each part on one core); 1 computes the days in one statement.
USAGE_ROLLUP_CONNECTIONS = env.int("USAGE_ROLLUP_CONNECTIONS", default=2)
# Longest time one sample may stand for in GPU-hours (a gap in collection counts no longer).
USAGE_SAMPLE_MAX_GAP_SECONDS = env.int("USAGE_SAMPLE_MAX_GAP_SECONDS", default=3600)
# Share of its cap an allocation's newest reading may reach before its team is told (dashboard
# notice, e-mail to its leads, webhook team.near_cap); told again after it fell below this
# share minus 0.1. 0 switches the notices off.
CAP_NOTICE_SHARE = env.float("CAP_NOTICE_SHARE", default=0.9)
# Seconds one request to a cluster's Prometheus may take.
PROMETHEUS_TIMEOUT = env.float("PROMETHEUS_TIMEOUT", default=30.0)

# --- Temporary grants ---------------------------------------------------------------------------
# A grant approved to start later holds its guarantee from approval on: bound how far ahead it
# may start and how long it may last (requests beyond either are refused naming the field).
TEMPORARY_GRANT_MAX_START_DAYS = env.int("TEMPORARY_GRANT_MAX_START_DAYS", default=30)
TEMPORARY_GRANT_MAX_DAYS = env.int("TEMPORARY_GRANT_MAX_DAYS", default=90)

# --- Suggestions ----------------------------------------------------------------------------------
# Day of the month (1-28) and hour (0-23, in PORTAL_TIME_ZONE) of the monthly suggestion run,
# which suggests next month's guarantees and caps from last month's usage.
SUGGESTIONS_DAY_OF_MONTH = env.int("SUGGESTIONS_DAY_OF_MONTH", default=1)
SUGGESTIONS_HOUR = env.int("SUGGESTIONS_HOUR", default=6)
if not 1 <= SUGGESTIONS_DAY_OF_MONTH <= 28:
    raise ImproperlyConfigured("SUGGESTIONS_DAY_OF_MONTH must be 1 to 28 (every month has it)")
if not 0 <= SUGGESTIONS_HOUR <= 23:
    raise ImproperlyConfigured("SUGGESTIONS_HOUR must be 0 to 23")

# --- Integrity: audit log MAC and anchors, webhook replay window, sandbox token -----------------
# Key of the audit log's HMAC-SHA256 (kept out of the database, so rewriting the log and
# recomputing its hashes shows). Unset: a key derived from SECRET_KEY, for the demo only (a loud
# warning, and an error in `manage.py check --deploy`).
AUDIT_MAC_KEY = env.str("AUDIT_MAC_KEY", default="")
# Earlier keys, comma-separated, still accepted for the events they MACed (key rotation).
AUDIT_MAC_PREVIOUS_KEYS = env.list("AUDIT_MAC_PREVIOUS_KEYS", default=[])
# Append-only file that receives the chain's head (seq, hash, MAC) as one JSON line per anchor,
# periodically and with every notification; verify_audit_chain compares the log against it.
# Unset: the demo's file in PORTAL_VAR_DIR (mode 0600), so a wiped demo log shows too; production
# names storage the database's users cannot reach (`check --deploy` errors while it is unset).
AUDIT_ANCHOR_FILE = env.str("AUDIT_ANCHOR_FILE", default="")
AUDIT_ANCHOR_FILE_IS_DEMO = not AUDIT_ANCHOR_FILE
if AUDIT_ANCHOR_FILE_IS_DEMO:
    AUDIT_ANCHOR_FILE = str(VAR_DIR / "audit-anchors.jsonl")
# Seconds between two anchors written by beat (`anchor audit log`).
AUDIT_ANCHOR_SECONDS = env.int("AUDIT_ANCHOR_SECONDS", default=300)
# Users and their roles written outside the portal's services (createsuperuser, the shell, a
# script) are audited by signal receivers (quotas.people).
AUDIT_USERS_WRITTEN_ELSEWHERE = True
# How far a webhook signature's timestamp may be from the receiver's clock, in seconds.
WEBHOOK_SIGNATURE_TOLERANCE_SECONDS = env.int("WEBHOOK_SIGNATURE_TOLERANCE_SECONDS", default=300)
# File holding the bearer token of the sandbox Kubernetes API (`make run` writes one per run).
KUBE_SANDBOX_TOKEN_FILE = env.str("KUBE_SANDBOX_TOKEN_FILE", default="")
# CA certificate (PEM) the sandbox API's HTTPS certificate chains to (`make run` makes one).
KUBE_SANDBOX_CA_FILE = env.str("KUBE_SANDBOX_CA_FILE", default="")

# --- Security: transport, cookies, CSP, login lockout, API throttling, tokens --------------------
# Every default here suits the local demo over plain HTTP; production sets the variables listed
# in the README's production section (deploy/kubernetes/configmap.yaml sets them), and
# `manage.py check --deploy` then passes (tests/portal/test_security_settings.py).
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE
LANGUAGE_COOKIE_HTTPONLY = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env.bool("DJANGO_BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Redirect plain HTTP to HTTPS (behind a proxy only with DJANGO_BEHIND_TLS_PROXY, or every request
# looks like HTTP). The probes are exempt: the kubelet calls them over plain HTTP.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# HSTS: 0 sends no header (the demo runs over HTTP); production: 31536000 (a year).
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)

# Content-Security-Policy of every response (portal.middleware): no inline scripts or styles
# anywhere, everything from the portal's own origin. PORTAL_CSP replaces the whole header line
# (e.g. to add a report-uri); PORTAL_CSP_REPORT_ONLY sends it as Report-Only instead.
PORTAL_CSP = env.str("PORTAL_CSP", default="") or (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
PORTAL_CSP_REPORT_ONLY = env.bool("PORTAL_CSP_REPORT_ONLY", default=False)

# Shared cache of the throttles: Redis when CACHE_URL or the Celery broker is Redis (counts are
# then shared by every web process), else the process's own memory (the zero-install demo).
_cache_url = env.str("CACHE_URL", default="")
if not _cache_url and CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _cache_url = CELERY_BROKER_URL
CACHES = {
    "default": (
        {**env.cache_url_config(_cache_url), "KEY_PREFIX": "portal"}
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Proxies in front of the portal that append to X-Forwarded-For (0: use the peer's address).
# The login lockout and the API throttles key on the client address this gives.
PORTAL_TRUSTED_PROXY_COUNT = env.int("PORTAL_TRUSTED_PROXY_COUNT", default=0)

# Login lockout (django-axes, database handler: attempts are rows every process sees, and the
# admin's "Access attempts" page unlocks by deleting them; `manage.py axes_reset_username NAME`
# too). LOGIN_LOCKOUT_FAILURES lock the pair of user name and address, so nobody elsewhere can
# lock a user out. Failures of one user name from all addresses, or of one address for all user
# names, lock at the higher LOGIN_LOCKOUT_WIDE_FAILURES, and not where that user has signed in
# before (portal.lockout.WideLockoutBackend). The Django admin's login is covered too (it
# authenticates through the same backends).
# Then the two ways in: the password (PasswordBackend, off with PASSWORD_LOGIN=false, which also
# ends the sessions it opened) and single sign-on (SsoBackend, on with OIDC_ISSUER; see below).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "portal.lockout.WideLockoutBackend",
    "portal.sso.backends.PasswordBackend",
    "portal.sso.backends.SsoBackend",
]
AXES_ENABLED = env.bool("LOGIN_LOCKOUT_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("LOGIN_LOCKOUT_FAILURES", default=10)
AXES_COOLOFF_TIME = datetime.timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
LOGIN_LOCKOUT_WIDE_FAILURES = env.int("LOGIN_LOCKOUT_WIDE_FAILURES", default=50)
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "portal.client.client_address"
AXES_LOCKOUT_CALLABLE = "portal.lockout.lockout_response"
AXES_USERNAME_CALLABLE = "portal.lockout.lockout_username"
AXES_HTTP_RESPONSE_CODE = 429
# A wrong password during the lockout does not push its end further out: a locked-out user
# knows when to try again.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False

# API throttling (DRF, counted in the cache above): per token, per client address, and failed
# token attempts per address (those never reach the throttles: see portal.api.auth). Rates are
# "N/s|min|hour|day"; 429 with Retry-After past them.
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
    "token": env.str("API_THROTTLE_TOKEN_RATE", default="600/min"),
    "address": env.str("API_THROTTLE_ADDRESS_RATE", default="1200/min"),
    "token_failure": env.str("API_THROTTLE_TOKEN_FAILURE_RATE", default="20/min"),
}
REST_FRAMEWORK["TEST_REQUEST_DEFAULT_FORMAT"] = "json"
# The largest API body read (a 50-line request is a few kilobytes): a larger one is a 400
# before it is parsed.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=256 * 1024)

# API tokens: lifetime when none is asked for, and the longest one may ask for.
API_TOKEN_DEFAULT_DAYS = env.int("API_TOKEN_DEFAULT_DAYS", default=90)
API_TOKEN_MAX_DAYS = env.int("API_TOKEN_MAX_DAYS", default=365)
# How long an API Idempotency-Key is remembered (its first response replayed) after first use.
IDEMPOTENCY_KEY_HOURS = env.int("IDEMPOTENCY_KEY_HOURS", default=24)

# --- Single sign-on (OpenID Connect, portal/sso/) -------------------------------------------------
# Off unless OIDC_ISSUER is set. The provider's endpoints come from its discovery document
# (<issuer>/.well-known/openid-configuration, read at the first sign-in and kept for
# OIDC_DISCOVERY_SECONDS) unless OIDC_AUTHORIZATION_ENDPOINT, OIDC_TOKEN_ENDPOINT and
# OIDC_JWKS_ENDPOINT name them. `manage.py check` refuses an incomplete configuration
# (portal/sso/checks.py).
OIDC_ISSUER = env.str("OIDC_ISSUER", default="").rstrip("/")
SSO_ENABLED = bool(OIDC_ISSUER)
# The name on the sign-in button ("Sign in with <name>").
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="SSO")
OIDC_RP_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="")
# The client secret, or a file holding it (a mounted secret; its first line), never both.
OIDC_CLIENT_SECRET_FILE = env.str("OIDC_CLIENT_SECRET_FILE", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
if OIDC_CLIENT_SECRET_FILE:
    if OIDC_RP_CLIENT_SECRET:
        raise ImproperlyConfigured("set OIDC_CLIENT_SECRET or OIDC_CLIENT_SECRET_FILE, not both")
    try:
        OIDC_RP_CLIENT_SECRET = (
            Path(OIDC_CLIENT_SECRET_FILE).read_text(encoding="utf-8").partition("\n")[0].strip()
        )
    except OSError as exc:
        raise ImproperlyConfigured(
            f"OIDC_CLIENT_SECRET_FILE {OIDC_CLIENT_SECRET_FILE} cannot be read: {exc.strerror}"
        ) from None
OIDC_RP_SCOPES = env.str("OIDC_SCOPES", default="openid email profile groups")
OIDC_RP_SIGN_ALGO = env.str("OIDC_SIGN_ALGORITHM", default="RS256")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_TOKEN_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_JWKS_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_USERINFO_ENDPOINT", default="")
OIDC_OP_LOGOUT_ENDPOINT = env.str("OIDC_END_SESSION_ENDPOINT", default="")
OIDC_DISCOVERY_SECONDS = env.int("OIDC_DISCOVERY_SECONDS", default=3600)
# Seconds one request to the provider may take; a CA bundle for a provider whose certificate
# does not chain to the system's authorities.
OIDC_TIMEOUT = env.float("OIDC_TIMEOUT", default=10.0)
OIDC_CA_FILE = env.str("OIDC_CA_FILE", default="")
# The claim holding the user's groups, and the groups that make platform admins, auditors and
# team leads or members ({slug} is the team's slug). A kind of role whose groups are unset is
# left as the portal's admins set it; one that is set follows the provider at every sign-in.
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="groups")
OIDC_ADMIN_GROUPS = env.list("OIDC_ADMIN_GROUPS", default=[])
OIDC_AUDITOR_GROUPS = env.list("OIDC_AUDITOR_GROUPS", default=[])
# Team patterns hold {slug} once, e.g. team:{slug}:lead; unset (the default), memberships stay
# as the portal's admins set them.
OIDC_TEAM_LEAD_GROUP = env.str("OIDC_TEAM_LEAD_GROUP", default="")
OIDC_TEAM_MEMBER_GROUP = env.str("OIDC_TEAM_MEMBER_GROUP", default="")
# First sign-in of someone with a local account of the same e-mail address: true links the two
# (the provider must say the address is verified, and only one account may have it); false
# (the default) makes a new account, so nobody takes over a local account by its address.
OIDC_LINK_BY_EMAIL = env.bool("OIDC_LINK_BY_EMAIL", default=False)
# false: the login page has no password form, a password POST is refused (the admin's login
# too), and sessions opened with a password end. API tokens keep working.
PASSWORD_LOGIN = env.bool("PASSWORD_LOGIN", default=True)
# mozilla-django-oidc: PKCE on top of state and nonce; its callback URL; no tokens kept in the
# session (the ID token only where the provider has an end-session endpoint, for the logout).
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_AUTHENTICATION_CALLBACK_URL = "sso-callback"
OIDC_STORE_ACCESS_TOKEN = False
OIDC_STORE_ID_TOKEN = False
if SSO_ENABLED and not env.str("PORTAL_CSP", default=""):
    # The logout form may end at the provider (RP-initiated logout): a redirect Chromium holds
    # to form-action.
    from urllib.parse import urlsplit

    _issuer = urlsplit(OIDC_ISSUER)
    PORTAL_CSP = PORTAL_CSP.replace(
        "form-action 'self'", f"form-action 'self' {_issuer.scheme}://{_issuer.netloc}"
    )
