"""The cross-cluster summary (``/summary/``): every team's guarantee and cap on each cluster and
resource with the totals over every cluster, then its GPUs over every cluster against its
ceiling and what they cost per month.

Everybody signed in sees it; a lead or member sees the other teams only as one row. The
figures are written out once here, and the two tables rendered by the Jinja2 backend
(``jinja2/overview/_summary.html``): a page of fifty teams has some two thousand cells.
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from approvals.budgets import BudgetRow, Budgets, team_budgets
from common.amounts import format_amount, format_money
from common.sections import jinja_section
from overview.selectors import Amounts, PlanSummary, SummaryRow, amount_cell, plan_summary
from quotas.roles import sees_everything


def _pair(cell: Amounts | None) -> str | None:
    """A cell's "guarantee / cap"; None where the team has nothing there."""
    if cell is None:
        return None
    return f"{amount_cell(cell.guarantee)} / {amount_cell(cell.cap)}"


def _summary_row(row: SummaryRow, testid: str, css: str = "") -> dict:
    return {
        "label": row.label,
        "team_name": row.team.name if row.team else None,
        "testid": testid,
        "css": css,
        "cells": [(_pair(c), label) for c, label in zip(row.cells, row.cell_labels, strict=True)],
        "totals": [
            (_pair(c), label) for c, label in zip(row.totals, row.total_labels, strict=True)
        ],
    }


def summary_table(table: PlanSummary) -> dict:
    """The summary's header and rows as the template writes them."""
    return {
        "clusters": table.clusters,
        "columns": table.columns,
        "resources": table.resources,
        "width": table.width,
        "capacities": [(amount_cell(c), label) for c, label in table.labelled_capacities],
        "capacity_totals": [(amount_cell(c), label) for c, label in table.labelled_capacity_totals],
        "rows": [_summary_row(row, f"summary-team-{row.label}") for row in table.rows],
        "others": _summary_row(table.others, "summary-others", "others") if table.others else None,
        "total": _summary_row(table.total, "summary-total", "total"),
    }


def _budget_row(row: BudgetRow, currency: str, testid: str, css: str = "") -> dict:
    ceiling = None
    if row.ceiling is not None:
        ceiling = {
            "counted": format_amount(row.counted_figure) if row.counted is not None else "",
            "ceiling": format_amount(row.ceiling),
            "percent": row.ceiling_percent,
            "with_teams_under": row.with_teams_under,
        }
    classes = " ".join(c for c in (css, "over" if row.over_ceiling else "") if c)
    return {
        "label": row.label,
        "team_name": row.team.name if row.team else None,
        "testid": testid,
        "css": classes,
        "over": row.over_ceiling,
        "guaranteed": format_amount(row.guaranteed),
        "capped": format_amount(row.capped),
        "ceiling": ceiling,
        "guaranteed_per_month": format_money(row.guaranteed_per_month, currency),
        "capped_per_month": format_money(row.capped_per_month, currency),
        "unpriced": format_amount(row.unpriced) if row.unpriced else None,
    }


def budget_table(budgets: Budgets) -> dict:
    """The budgets' rows as the template writes them."""
    currency = budgets.currency
    rows = [_budget_row(row, currency, f"budget-{row.label}") for row in budgets.rows]
    if budgets.others:
        rows.append(_budget_row(budgets.others, currency, "budget-others", "others"))
    rows.append(_budget_row(budgets.total, currency, "budget-total", "total"))
    return {
        "priced": budgets.priced,
        "currency": currency,
        "hours_per_month": budgets.hours_per_month,
        "rows": rows,
    }


@login_required
def summary(request: HttpRequest) -> HttpResponse:
    table = plan_summary(
        user=request.user,
        others_label=_("Other teams"),
        total_label=_("Total"),
        all_clusters_label=_("All clusters"),
    )
    budgets = team_budgets(user=request.user, others_label=_("Other teams"), total_label=_("Total"))
    context = {
        "summary": summary_table(table),
        "budgets": budget_table(budgets),
        "sees_everything": sees_everything(request.user),
    }
    sections = jinja_section(request, "overview/_summary.html", context)
    return render(request, "overview/summary.html", {"sections": sections})
