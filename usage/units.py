"""What the usage figures count, in words: GPU-hours of whole GPUs, slice-hours of MIG slices
(a slice is not a GPU, and the portal keeps no slices-per-GPU factor to convert them), and
unit-hours of anything else, with the matching utilization label."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _


@dataclass(frozen=True)
class HourLabels:
    hours: str
    borrowed: str
    idle: str
    utilization: str


def hour_labels(*, kind: str, unit: str) -> HourLabels:
    """The labels of a resource's hour and utilization figures, by its kind (Resource.Kind)
    and unit, in the active language."""
    if kind == "gpu":
        return HourLabels(
            hours=_("GPU-hours"),
            borrowed=_("Borrowed GPU-hours"),
            idle=_("Idle guaranteed GPU-hours"),
            utilization=_("Mean GPU utilization"),
        )
    if kind == "mig":
        return HourLabels(
            hours=_("slice-hours"),
            borrowed=_("Borrowed slice-hours"),
            idle=_("Idle guaranteed slice-hours"),
            utilization=_("Mean slice utilization"),
        )
    return HourLabels(
        hours=_("%(unit)s-hours") % {"unit": unit},
        borrowed=_("Borrowed %(unit)s-hours") % {"unit": unit},
        idle=_("Idle guaranteed %(unit)s-hours") % {"unit": unit},
        utilization=_("Mean utilization"),
    )
