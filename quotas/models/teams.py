"""Teams (with an optional parent department), their people and their namespaces."""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import dns1123_label_validator


class Team(models.Model):
    slug = models.SlugField(
        max_length=63, unique=True, validators=[dns1123_label_validator], verbose_name=_("slug")
    )
    name = models.CharField(max_length=200, verbose_name=_("name"))
    description = models.TextField(blank=True, verbose_name=_("description"))
    # A department is a team with children; its Volcano queue becomes their parent queue.
    parent = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="children",
        help_text=_("Department this team belongs to."),
        verbose_name=_("parent"),
    )
    contact_email = models.EmailField(blank=True, verbose_name=_("contact email"))
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        through="TeamMembership",
        related_name="teams",
        verbose_name=_("members"),
    )
    # The source's hybrid-cloud answer: one bound over every cluster, so a team cannot add
    # GPUs without limit where they are easy to get (quotas.budgets counts them).
    gpu_ceiling = models.DecimalField(
        _("GPU ceiling"),
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=_(
            "Most GPUs the caps of this team (and of the teams under it) may add up to over "
            "all clusters together: whole GPUs, and MIG slices by their share of a card. "
            "Empty: no ceiling."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("team")
        verbose_name_plural = _("teams")
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=~Q(parent=F("pk")), name="team_not_own_parent"),
            models.CheckConstraint(
                condition=Q(gpu_ceiling__isnull=True) | Q(gpu_ceiling__gte=0),
                name="team_gpu_ceiling_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def ancestors(self) -> list["Team"]:
        """Parents from the nearest up; stops on a cycle instead of looping."""
        chain: list[Team] = []
        seen = {self.pk}
        node = self.parent
        while node is not None and node.pk not in seen:
            chain.append(node)
            seen.add(node.pk)
            node = node.parent
        return chain


class TeamMembership(models.Model):
    class Role(models.TextChoices):
        LEAD = "lead", _("Team lead")
        MEMBER = "member", _("Member")

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("team")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="team_memberships",
        verbose_name=_("user"),
    )
    role = models.CharField(
        max_length=8, choices=Role.choices, default=Role.MEMBER, verbose_name=_("role")
    )

    class Meta:
        verbose_name = _("team membership")
        verbose_name_plural = _("team memberships")
        ordering = ["team__slug", "role", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()} of {self.team})"


class TeamNamespace(models.Model):
    """One Kubernetes namespace of a team on one cluster."""

    class WorkloadClass(models.TextChoices):
        INFERENCE = "inference", _("Inference")
        TRAINING = "training", _("Training")
        DEV = "dev", _("Development")

    team = models.ForeignKey(
        Team, on_delete=models.PROTECT, related_name="namespaces", verbose_name=_("team")
    )
    cluster = models.ForeignKey(
        "quotas.Cluster",
        on_delete=models.PROTECT,
        related_name="namespaces",
        verbose_name=_("cluster"),
    )
    name = models.CharField(
        max_length=63, validators=[dns1123_label_validator], verbose_name=_("name")
    )
    workload_class = models.CharField(
        max_length=16,
        choices=WorkloadClass.choices,
        default=WorkloadClass.TRAINING,
        verbose_name=_("workload class"),
    )
    # Staged rollout: a shadow namespace is computed and reported but never written.
    shadow = models.BooleanField(default=False, verbose_name=_("shadow"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("team namespace")
        verbose_name_plural = _("team namespaces")
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="namespace_unique_per_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"
