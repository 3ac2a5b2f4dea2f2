"""Data model of usage: samples, daily rollups, where a cluster's Prometheus is, and the
monthly suggestions computed from them and how they did (their backtest)."""

from usage.models.backtests import SuggestionBacktest
from usage.models.notices import CapNotice
from usage.models.samples import PrometheusSource, UsageDaily, UsageSample, UsageSource
from usage.models.suggestions import Suggestion

__all__ = [
    "CapNotice",
    "PrometheusSource",
    "Suggestion",
    "SuggestionBacktest",
    "UsageDaily",
    "UsageSample",
    "UsageSource",
]
