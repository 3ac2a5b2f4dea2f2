"""Data model of usage: samples, daily rollups, where a cluster's Prometheus is, and the
monthly suggestions computed from them."""

from usage.models.notices import CapNotice
from usage.models.samples import PrometheusSource, UsageDaily, UsageSample, UsageSource
from usage.models.suggestions import Suggestion

__all__ = [
    "CapNotice",
    "PrometheusSource",
    "Suggestion",
    "UsageDaily",
    "UsageSample",
    "UsageSource",
]
