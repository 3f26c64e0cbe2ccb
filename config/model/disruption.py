"""How Karpenter may take a pool's nodes away: expiry, consolidation and disruption budgets,
validated as the karpenter.sh/v1 NodePool CRD of the pinned chart validates them (Karpenter
v1.14 karpenter.sh_nodepools.yaml: spec.disruption and spec.template.spec.expireAfter)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from config import patterns
from config.model.base import StrictModel


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
        pattern=patterns.BUDGET_SCHEDULE.regex,
        description='When the budget starts to apply, as cron in UTC ("0 4 * * *") or a macro '
        "(@daily); needs duration. Unset: always.",
    )
    duration: str | None = Field(
        default=None,
        pattern=patterns.BUDGET_DURATION.regex,
        description="How long the budget applies after each schedule hit, in hours and minutes "
        '("22h", "1h30m"); needs schedule.',
    )

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> DisruptionBudgetConfig:
        # The CRD's rule: self.all(x, has(x.schedule) == has(x.duration)).
        if (self.schedule is None) != (self.duration is None):
            raise ValueError(
                "schedule and duration go together: a budget applies from each schedule hit "
                "for duration; set both, or neither for a budget that always applies"
            )
        return self


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
