"""How Karpenter may take a pool's nodes away: expiry, consolidation and disruption budgets,
validated as the karpenter.sh/v1 NodePool CRD of the pinned chart validates them (Karpenter
v1.14 karpenter.sh_nodepools.yaml: spec.disruption and spec.template.spec.expireAfter), and a
budget's schedule as Karpenter's controller reads it (config/cron_schedule.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config import patterns
from config.cron_schedule import budget_schedule, karpenter_duration, longest_gap
from config.model.base import StrictModel, duration_seconds


class DisruptionBudgetConfig(StrictModel):
    """At most `nodes` of the pool's nodes disrupted at once, for the given reasons, always or
    from each `schedule` hit for `duration` (Karpenter uses the most restrictive active budget)."""

    nodes: str = Field(
        pattern=patterns.BUDGET_NODES.regex,
        description='How many nodes may be disrupted at once: a count ("0" stops disruption) or '
        'a percentage of the pool\'s nodes ("10%").',
    )
    reasons: list[Literal["Empty", "Drifted", "Underutilized"]] | None = Field(
        default=None,
        description="The disruptions the budget limits (Empty, Drifted, Underutilized); unset: "
        "all of them. Expiry is not limited by budgets.",
    )
    schedule: str | None = Field(
        default=None,
        description="When the budget starts to apply: five cron fields, minute hour "
        'day-of-month month day-of-week, in UTC ("0 4 * * *" daily at 04:00, "0 4 * * 0" or '
        '"0 4 * * SUN" Sundays; Sunday is 0, there is no 7), or a macro (@daily, @weekly, '
        "@monthly, @yearly, @hourly); no time zone prefix, no seconds field. Read as Karpenter "
        "reads it (robfig/cron v3.0.1): one it cannot read stops every disruption of the pool. "
        "Needs duration. Unset: always.",
    )
    duration: str | None = Field(
        default=None,
        pattern=patterns.BUDGET_DURATION.regex,
        description="How long the budget applies after each schedule hit, in hours and minutes "
        '("22h", "1h30m"); needs schedule. Shorter than the time between two hits (24h for a '
        "daily schedule, 168h for a weekly one), or the budget never stops applying.",
    )

    @field_validator("schedule")
    @classmethod
    def _karpenter_reads_the_schedule(cls, schedule: str | None) -> str | None:
        if schedule is not None:
            budget_schedule(schedule)
        return schedule

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> DisruptionBudgetConfig:
        # The CRD's rule: self.all(x, has(x.schedule) == has(x.duration)).
        if (self.schedule is None) != (self.duration is None):
            raise ValueError(
                "schedule and duration go together: a budget applies from each schedule hit "
                "for duration; set both, or neither for a budget that always applies"
            )
        return self

    @model_validator(mode="after")
    def _duration_leaves_a_window(self) -> DisruptionBudgetConfig:
        # Budget.IsActive (Karpenter v1.14.1 nodepool.go): active while the schedule's next hit
        # after now - duration is not after now, i.e. while a hit lies within duration before
        # now. A duration of at least the longest gap between hits covers every moment.
        if self.schedule is None or self.duration is None:
            return self
        gap = longest_gap(budget_schedule(self.schedule))
        seconds = duration_seconds(self.duration)
        if gap is None or seconds < gap.total_seconds():
            return self
        period = karpenter_duration(gap)
        example = (
            f" ({karpenter_duration(gap - timedelta(hours=2))} leaves a 2h window)"
            if gap > timedelta(hours=2)
            else ""
        )
        raise ValueError(
            f"duration: {self.duration} is not shorter than {period}, the longest time between "
            f"two hits of schedule {self.schedule!r}; the budget applies from each hit for "
            "duration, so it would apply all the time, as one without schedule does (Karpenter "
            f"v1.14.1 Budget.IsActive); make duration shorter than {period}{example}, or remove "
            "schedule and duration for a budget that always applies"
        )


class DisruptionConfig(StrictModel):
    """When Karpenter replaces or removes the pool's nodes on its own."""

    expire_after: str = Field(
        default="720h",
        pattern=patterns.EXPIRE_AFTER.regex,
        description='How long a node lives before Karpenter replaces it, or "Never" (the '
        "default, 720h, is Karpenter's). Expiry ignores disruption budgets.",
    )
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = Field(
        default="WhenEmpty",
        description="Which nodes consolidation removes: only empty ones, or underutilized ones "
        "too (their pods move).",
    )
    consolidate_after: str = Field(
        default="120s",
        pattern=patterns.DURATION.regex,
        description="How long a node stays empty (or underutilized) before consolidation "
        "removes it (s, m or h).",
    )
    budgets: list[DisruptionBudgetConfig] = Field(
        default=[],
        max_length=50,
        description="Disruption budgets; empty: Karpenter's default, 10% of the nodes at once "
        "(docs/operations.md, Disruption of network-function pools).",
    )
