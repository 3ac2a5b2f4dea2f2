"""``{{ chart_data|charts_json }}``: a page's plotly figures as the JSON its script reads."""

from django import template

from common.charts import charts_json as _charts_json

register = template.Library()


@register.filter
def charts_json(charts):
    return _charts_json(charts)
