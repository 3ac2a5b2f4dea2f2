"""Shared field definitions and validators of the quota models."""

from decimal import Decimal

from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

# Kubernetes object names: DNS-1123 label (namespaces) and qualified resource names.
dns1123_label_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    _(
        "must be a DNS-1123 label: lowercase letters, digits and '-', start and end "
        "alphanumeric, at most 63 characters"
    ),
)
resource_name_validator = RegexValidator(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
    _("must be a Kubernetes resource name such as nvidia.com/gpu or cpu"),
)


def amount_field(verbose_name: str, **kwargs) -> models.DecimalField:
    """An amount of a resource in its catalog unit (whole GPUs, slices, MiB, cores, GiB)."""
    kwargs.setdefault("max_digits", 14)
    kwargs.setdefault("decimal_places", 3)
    return models.DecimalField(verbose_name, **kwargs)


ZERO = Decimal(0)
