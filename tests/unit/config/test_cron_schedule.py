"""config/cron_schedule.py: a budget's schedule as robfig/cron v3.0.1 reads it when Karpenter
v1.14.1 calls `cron.ParseStandard("TZ=UTC " + schedule)`, each refusal in plain words, and the
longest time between hits. tests/integration/config/test_cron_schedule_robfig.py holds the
same rules to the real parser."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import date, timedelta
from itertools import pairwise
from typing import Any

import pytest
import yaml

from config import parse_config
from config.cron_schedule import (
    NODEPOOL_CRD_SCHEDULE_PATTERN,
    CronSchedule,
    ScheduleError,
    budget_schedule,
    karpenter_duration,
    longest_gap,
    parse_schedule,
)
from tests.conftest import REPO
from tests.helpers import shared_reference


def crd_schedule_schema() -> dict[str, Any]:
    path = shared_reference("karpenter-v1.14.1/crds") / "karpenter.sh_nodepools.yaml"
    (version,) = yaml.safe_load(path.read_text())["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    budget = spec["properties"]["disruption"]["properties"]["budgets"]["items"]
    schedule: dict[str, Any] = budget["properties"]["schedule"]
    return schedule


def days(first_year: int, end_year: int) -> Iterator[date]:
    day = date(first_year, 1, 1)
    while day.year < end_year:
        yield day
        day += timedelta(days=1)


def max_gap(hits: Iterable[date]) -> timedelta:
    """The longest time between consecutive midnights of the given days."""
    return max(b - a for a, b in pairwise(hits))


def test_the_crd_pattern_is_the_pinned_crds() -> None:
    schema = crd_schedule_schema()
    assert schema["pattern"] == NODEPOOL_CRD_SCHEDULE_PATTERN
    assert "Timezones are not supported" in schema["description"]


@pytest.mark.parametrize(
    ("schedule", "minutes", "hours", "days_of_week"),
    [
        ("0 4 * * 0", {0}, {4}, {0}),
        ("0 4 * * SUN", {0}, {4}, {0}),
        ("0 4 * * sun", {0}, {4}, {0}),
        ("*/15 2-4 * * 1-5", {0, 15, 30, 45}, {2, 3, 4}, {1, 2, 3, 4, 5}),
        ("30 22-23,0-1 * * mon-fri/2", {30}, {22, 23, 0, 1}, {1, 3, 5}),
        ("0 4 ? * 6", {0}, {4}, {6}),
        ("  0\t4 * *   0 ", {0}, {4}, {0}),  # strings.Fields and TrimSpace
        ("@weekly", {0}, {0}, {0}),
        ("+5 4 * * 0,", {5}, {4}, {0}),  # strconv.Atoi takes a sign; getField drops empties
    ],
)
def test_robfig_reads(
    schedule: str, minutes: set[int], hours: set[int], days_of_week: set[int]
) -> None:
    parsed = parse_schedule(schedule)
    assert parsed.minutes == minutes
    assert parsed.hours == hours
    assert parsed.days_of_week == days_of_week


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("0 4 * * 7", "day of week 7 is outside 0-6 (Sunday is 0 or SUN; robfig/cron has no 7)"),
        ("0 26 * * 0", "hour 26 is outside 0-23 (in UTC)"),
        ("60 4 * * 0", "minute 60 is outside 0-59"),
        ("0 4 0 * *", "day of month 0 is outside 1-31"),
        ("0 4 * 13 *", "month 13 is outside 1-12 (or JAN-DEC)"),
        ("0 4 * * 5-2", "runs backwards; cron ranges do not wrap, so list both parts: 5-6,0-2"),
        ("0 4 * * fri-mon", "list both parts: 5-6,0-1"),
        ("*/0 4 * * *", "minute step /0"),
        ("*/x 4 * * *", "minute step 'x' is not a whole number"),
        ("1-2-3 4 * * *", "minute '1-2-3' has more than one '-'"),
        ("*/5/2 4 * * *", "minute '*/5/2' has more than one '/'"),
        ("0x1 4 * * *", "minute '0x1' is not a number 0-59, a range or *"),
        ("0 4 * * Sunday", "day of week 'Sunday' is not a number 0-6, a name SUN-SAT"),
        ("0 4 * * *  *", "6 fields, but robfig/cron's standard parser takes exactly 5"),
        ("0 4 * *", "4 fields"),
        ("", "0 fields"),
        ("TZ=Europe/Berlin 0 4 * * *", "drop TZ=Europe/Berlin and give the time in UTC"),
        ("CRON_TZ=UTC 0 4 * * *", "Karpenter puts TZ=UTC in front of every schedule"),
        ("@DAILY", "@DAILY is no macro robfig/cron knows"),
        ("@every 1h", "@every counts its interval from whenever Karpenter asks"),
    ],
)
def test_robfig_refuses_naming_what_is_wrong(schedule: str, problem: str) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(schedule)
    assert problem in str(refused.value)


def test_every_wrong_field_is_named_at_once() -> None:
    with pytest.raises(ScheduleError) as refused:
        budget_schedule("every sunday at two am")
    message = str(refused.value)
    for field in ("minute 'every'", "hour 'sunday'", "day of month 'at'", "month 'two'"):
        assert field in message
    assert message.startswith("'every sunday at two am' is no schedule Karpenter can read: ")
    assert "allows no disruption of the pool's nodes at all" in message
    assert 'Give five fields, minute hour day-of-month month day-of-week, for example "0 4' in (
        message
    )


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        (" @daily", "the NodePool CRD's pattern does not match it"),
        ("0 4 * *\u00a00", "the NodePool CRD's pattern does not match it"),  # Go's \s is ASCII
        ("0 4 * * *\n", "the NodePool CRD's pattern does not match it"),  # Go's $ is the end
        ("0 4 31 2 *", "never fires"),
        ("0 4 31 4,6,9,11 *", "never fires"),
        ("0 4 * * ,", "never fires"),
    ],
)
def test_a_budget_schedule_must_pass_the_crd_and_fire(schedule: str, problem: str) -> None:
    parse_schedule(schedule)  # robfig/cron reads each of them
    with pytest.raises(ScheduleError) as refused:
        budget_schedule(schedule)
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    ("schedule", "gap"),
    [
        ("0 4 * * *", timedelta(days=1)),
        ("@daily", timedelta(days=1)),
        ("0 4 * * 0", timedelta(weeks=1)),
        ("0 4 * * SUN", timedelta(weeks=1)),
        ("@weekly", timedelta(weeks=1)),
        ("0 4,6 * * *", timedelta(hours=22)),
        ("*/15 2-4 * * 1-5", timedelta(days=2, hours=21, minutes=15)),  # Fri 04:45 to Mon 02:00
        ("@hourly", timedelta(hours=1)),
        ("* * * * *", timedelta(minutes=1)),
        ("@monthly", timedelta(days=31)),
        ("0 0 31 * *", timedelta(days=61)),  # from May 31 to July 31
        ("0 0 29 2 *", timedelta(days=4 * 365 + 1)),  # leap days
        ("0 0 13 * 5", timedelta(days=7)),  # both day fields set: the 13th or a Friday
        ("0 0 * 2 MON", max_gap(d for d in days(2001, 2030) if d.month == 2 and d.weekday() == 0)),
    ],
)
def test_longest_gap_between_hits(schedule: str, gap: timedelta) -> None:
    assert longest_gap(parse_schedule(schedule)) == gap


def test_a_schedule_that_never_fires_has_no_gap() -> None:
    never = CronSchedule(
        frozenset({0}),
        frozenset({4}),
        frozenset({30}),
        frozenset({2}),
        frozenset(range(7)),
        day_of_month_star=False,
        day_of_week_star=True,
    )
    assert longest_gap(never) is None


@pytest.mark.parametrize(
    ("span", "written"),
    [(timedelta(hours=166), "166h"), (timedelta(minutes=90), "1h30m"), (timedelta(0), "0m")],
)
def test_spans_are_written_as_karpenter_durations(span: timedelta, written: str) -> None:
    assert karpenter_duration(span) == written


OPERATIONS = REPO / "docs" / "operations.md"


def test_the_budgets_operations_md_shows_pass_and_the_schedules_it_lists_as_refused_fail() -> None:
    text = OPERATIONS.read_text()
    shown = [
        json.loads(line.strip().rstrip(","))
        for line in text.splitlines()
        if line.strip().startswith('{"nodes"')
    ]
    assert {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 4 * * 0", "duration": "166h"} in (
        shown
    )
    raw = {"node_pools": [{"name": "multus", "disruption": {"budgets": shown}}]}
    assert len(parse_config(raw).node_pools[0].disruption.budgets) == len(shown)
    table = text.split("| schedule | why it is refused |")[1].split("\n\n")[0]
    refused = [
        schedule
        for row in table.splitlines()[2:]
        for schedule in re.findall(r"`([^`]+)`", row.split("|")[1])
    ]
    assert len(refused) >= 7
    for schedule in refused:
        with pytest.raises(ScheduleError):
            budget_schedule(schedule)
