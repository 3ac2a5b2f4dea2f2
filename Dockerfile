# Image of the portal: web (gunicorn), Celery worker and beat all run from it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PORTAL_VAR_DIR=/var/lib/portal

WORKDIR /app
# The locked tree first (hashes checked), then the portal without resolving anything more.
COPY requirements.txt ./
RUN pip install --no-cache-dir --require-hashes -r requirements.txt
COPY pyproject.toml README.md ./
COPY common ./common
COPY portal ./portal
COPY quotas ./quotas
COPY approvals ./approvals
RUN pip install --no-cache-dir --no-deps .
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY locale ./locale

RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home /app portal \
    && mkdir -p /var/lib/portal && chown portal /var/lib/portal

USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--no-control-socket"]
