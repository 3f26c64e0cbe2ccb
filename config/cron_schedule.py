"""A disruption budget's schedule, read as Karpenter reads it.

Karpenter v1.14.1 (sigs.k8s.io/karpenter pkg/apis/v1/nodepool.go, `Budget.IsActive`) parses
`node_pools[].disruption.budgets[].schedule` on every disruption pass with robfig/cron v3.0.1:
`cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", schedule))`. A schedule it cannot read makes
`GetAllowedDisruptions` return 0 ("If the budget is misconfigured, fail closed"), and
`MustGetAllowedDisruptions` gives 0 for every reason as soon as any budget of the pool errs: the
pool's nodes are never drifted or consolidated again, and only the controller's log says so
("detected disruption budget errors"). The NodePool CRD checks no more than the pattern
NODEPOOL_CRD_SCHEDULE_PATTERN below, which `0 4 * * 7` or `every sunday at two am` pass.

`parse_schedule` is that parser, rule for rule (robfig/cron v3.0.1 parser.go: `Parse`,
`normalizeFields`, `getField`, `getRange`, `parseIntOrName`, `mustParseInt`,
`parseDescriptor`; spec.go: the bounds and names of each field), with each refusal said in an
operator's words; tests/integration/config/test_cron_schedule_robfig.py runs the real parser on
the same schedules. On top of it `budget_schedule` refuses what the parser reads but a budget
cannot use, and `longest_gap` gives the longest time between two hits (a budget whose duration
is that long never stops applying).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from itertools import pairwise

#: The NodePool CRD's pattern of spec.disruption.budgets[].schedule (Karpenter v1.14.1
#: karpenter.sh_nodepools.yaml), as the API server matches it: with Go's regexp, where `\s` is
#: [\t\n\f\r ] and `$` only the end of the text (_CRD_SCHEDULE is that in Python's re).
NODEPOOL_CRD_SCHEDULE_PATTERN = (
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
_CRD_SCHEDULE = re.compile(
    NODEPOOL_CRD_SCHEDULE_PATTERN.replace(r"\s", r"[\t\n\f\r ]").removesuffix("$") + r"\Z"
)
#: The descriptors parseDescriptor knows besides @every (case-sensitive, as its switch).
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
#: Go's unicode.IsSpace, which strings.Fields splits on and strings.TrimSpace trims: ASCII
#: \t \n \v \f \r and space, U+0085, U+00A0 and Unicode's other White_Space characters.
_GO_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)
_GO_INT = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: an optional sign and ASCII digits
_GO_INT_MAX = 2**63 - 1  # Atoi's int is 64 bits: larger numbers are "out of range"
FIELD_ORDER = "minute hour day-of-month month day-of-week"
EXAMPLE = '"0 4 * * 0" (Sundays at 04:00 UTC), "0 4 * * *" (daily) or @daily'


class ScheduleError(ValueError):
    """A schedule Karpenter (or its NodePool CRD) cannot use; the message says why, and with
    `has_fix` also what to write instead."""

    def __init__(self, message: str, has_fix: bool = False) -> None:
        super().__init__(message)
        self.has_fix = has_fix


@dataclass(frozen=True)
class _Bounds:
    """One field of a cron schedule (spec.go, `bounds`): its range, names and what to say."""

    what: str
    low: int
    high: int
    names: Mapping[str, int]
    hint: str = ""


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    _Bounds("minute", 0, 59, {}),
    _Bounds("hour", 0, 23, {}, "in UTC"),
    _Bounds("day of month", 1, 31, {}),
    _Bounds("month", 1, 12, {name: n for n, name in enumerate(_MONTHS, 1)}, "or JAN-DEC"),
    _Bounds(
        "day of week",
        0,
        6,
        {name: n for n, name in enumerate(_WEEKDAYS)},
        "Sunday is 0 or SUN; robfig/cron has no 7",
    ),
)


@dataclass(frozen=True)
class CronSchedule:
    """What robfig/cron's SpecSchedule holds: the minutes, hours, days of month, months and
    days of week it fires at (second 0, UTC), and whether a day field was `*` or `?` (then a
    day must match both day fields, otherwise either: spec.go, `dayMatches`)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    day_of_month_star: bool
    day_of_week_star: bool

    def fires_on(self, month: int, day: int, weekday: int) -> bool:
        """Whether it fires on that day (weekday: 0 is Sunday)."""
        if month not in self.months:
            return False
        dom, dow = day in self.days_of_month, weekday in self.days_of_week
        if self.day_of_month_star or self.day_of_week_star:
            return dom and dow
        return dom or dow

    def times_of_day(self) -> list[int]:
        """The minutes after midnight it fires at on a day it fires, in order."""
        return sorted(hour * 60 + minute for hour in self.hours for minute in self.minutes)


def _every(bounds: _Bounds) -> frozenset[int]:
    return frozenset(range(bounds.low, bounds.high + 1))


_MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK = _FIELDS
# parseDescriptor's SpecSchedules: all(...) sets the star bit.
_DESCRIBED = {
    "@yearly": ({0}, {0}, {1}, {1}, _every(_DAY_OF_WEEK), False, True),
    "@monthly": ({0}, {0}, {1}, _every(_MONTH), _every(_DAY_OF_WEEK), False, True),
    "@weekly": ({0}, {0}, _every(_DAY_OF_MONTH), _every(_MONTH), {0}, True, False),
    "@daily": ({0}, {0}, _every(_DAY_OF_MONTH), _every(_MONTH), _every(_DAY_OF_WEEK), True, True),
    "@hourly": (
        {0},
        _every(_HOUR),
        _every(_DAY_OF_MONTH),
        _every(_MONTH),
        _every(_DAY_OF_WEEK),
        True,
        True,
    ),
}
_DESCRIBED["@annually"] = _DESCRIBED["@yearly"]
_DESCRIBED["@midnight"] = _DESCRIBED["@daily"]


def _trim(text: str) -> str:
    """Go's strings.TrimSpace."""
    start, end = 0, len(text)
    while start < end and text[start] in _GO_SPACE:
        start += 1
    while end > start and text[end - 1] in _GO_SPACE:
        end -= 1
    return text[start:end]


def _fields(text: str) -> list[str]:
    """Go's strings.Fields: the runs of characters between unicode.IsSpace ones."""
    return [field for field in re.split(f"[{re.escape(''.join(_GO_SPACE))}]+", text) if field]


def parse_schedule(schedule: str) -> CronSchedule:
    """The schedule as `cron.ParseStandard("TZ=UTC " + schedule)` reads it; ScheduleError with
    every problem of its fields when it refuses it (the parser stops at the first)."""
    # Parse: "TZ=UTC" is the prefix; the rest, from the space after it, is trimmed. A second
    # TZ= or CRON_TZ= (the schedule's own) is not looked for again: it is a field.
    spec = _trim(schedule)
    if spec.startswith(("TZ=", "CRON_TZ=")):
        zone = spec.split(maxsplit=1)[0]
        raise ScheduleError(
            f"{zone} sets a time zone, but Karpenter puts TZ=UTC in front of every schedule and "
            "robfig/cron reads one such prefix only, so this one counts as a field and the "
            'schedule has too many; budgets run in UTC (the NodePool CRD: "Timezones are not '
            f'supported"): drop {zone} and give the time in UTC',
            has_fix=True,
        )
    if spec.startswith("@"):
        return _descriptor(spec)
    fields = _fields(spec)
    if len(fields) != len(_FIELDS):
        raise ScheduleError(_field_count_problem(fields))
    problems: list[str] = []
    parsed = [_field(text, bounds, problems) for text, bounds in zip(fields, _FIELDS, strict=True)]
    if problems:
        raise ScheduleError("; ".join(problems))
    (minutes, _), (hours, _), (doms, dom_star), (months, _), (dows, dow_star) = parsed
    return CronSchedule(minutes, hours, doms, months, dows, dom_star, dow_star)


def _descriptor(spec: str) -> CronSchedule:
    described = _DESCRIBED.get(spec)
    if described is not None:
        minutes, hours, doms, months, dows, dom_star, dow_star = described
        return CronSchedule(
            frozenset(minutes),
            frozenset(hours),
            frozenset(doms),
            frozenset(months),
            frozenset(dows),
            dom_star,
            dow_star,
        )
    if spec.startswith("@every "):
        # parseDescriptor reads "@every <Go duration>" as a ConstantDelaySchedule: its Next is
        # the time asked for plus the interval, so IsActive finds a hit within duration always
        # (duration at least the interval) or never. The NodePool CRD's pattern refuses it too.
        raise ScheduleError(
            "@every counts its interval from whenever Karpenter asks, not from a time of day, so "
            "the budget would apply always or never (and the NodePool CRD refuses @every); "
            'write a cron schedule, for example "0 */2 * * *" for every two hours'
        )
    raise ScheduleError(
        f"{spec.split()[0]} is no macro robfig/cron knows; write one of {', '.join(DESCRIPTORS)} "
        "(lowercase, alone) or five cron fields",
        has_fix=True,
    )


def _field_count_problem(fields: list[str]) -> str:
    found = f"{len(fields)} field{'s' if len(fields) != 1 else ''}"
    if len(fields) == len(_FIELDS) + 1:
        return (
            f"{found}, but robfig/cron's standard parser takes exactly 5 ({FIELD_ORDER}) and has "
            "no seconds field (nor a year field); drop the extra one"
        )
    return f"{found}, but robfig/cron's standard parser takes exactly 5: {FIELD_ORDER}"


def _field(text: str, bounds: _Bounds, problems: list[str]) -> tuple[frozenset[int], bool]:
    """getField: the values of a comma-separated list of ranges, and whether one was a star.
    An empty list (",") gives no value at all, as in getField."""
    values: set[int] = set()
    star = False
    for expression in (part for part in text.split(",") if part):
        problem, found, found_star = _range(expression, bounds)
        if problem is not None:
            problems.append(problem)
            continue
        values |= found
        star = star or found_star
    return frozenset(values), star


def _range(expression: str, bounds: _Bounds) -> tuple[str | None, set[int], bool]:
    """getRange: number | number "-" number [ "/" number ], `*` or `?` for the whole range;
    "N/step" means N to the end. Returns (problem, values, star)."""
    what = bounds.what
    range_and_step = expression.split("/")
    if len(range_and_step) > 2:
        return f"{what} {expression!r} has more than one '/'", set(), False
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    # getRange looks no further than a star: "*-3" is the whole range.
    ends = (bounds.low, bounds.high) if star else _ends(expression, low_and_high, bounds)
    if isinstance(ends, str):
        return ends, set(), False
    start, end = ends
    step = 1
    if len(range_and_step) == 2:
        text = range_and_step[1]
        if not _GO_INT.fullmatch(text) or not 0 <= int(text) <= _GO_INT_MAX:
            return f"{what} step {text!r} is not a whole number", set(), False
        step = int(text)
        if len(low_and_high) == 1:
            end = bounds.high
        star = star and step <= 1
    outside = [n for n in dict.fromkeys((start, end)) if not bounds.low <= n <= bounds.high]
    if outside:
        hint = f" ({bounds.hint})" if bounds.hint else ""
        return f"{what} {outside[0]} is outside {bounds.low}-{bounds.high}{hint}", set(), False
    if start > end:
        return (
            f"{what} range {range_and_step[0]!r} runs backwards; cron ranges do not wrap, so "
            f"list both parts: {start}-{bounds.high},{bounds.low}-{end}",
            set(),
            False,
        )
    if step == 0:
        return f"{what} step /0: a step is 1 or more", set(), False
    return None, set(range(start, end + 1, step)), star


def _ends(expression: str, low_and_high: list[str], bounds: _Bounds) -> tuple[int, int] | str:
    """The first and last value of a number or a range a-b, or what is wrong with it."""
    if len(low_and_high) > 2:
        return f"{bounds.what} {expression!r} has more than one '-'"
    numbers = [_number(part, bounds) for part in low_and_high]
    for part, number in zip(low_and_high, numbers, strict=True):
        if number is None:
            return f"{bounds.what} {part!r} is not {_what_it_takes(bounds)}"
    start, end = numbers[0], numbers[-1]
    assert start is not None and end is not None
    return start, end


def _number(text: str, bounds: _Bounds) -> int | None:
    """parseIntOrName: a name of the field (strings.ToLower, which turns U+0130 into i), or
    strconv.Atoi's number; None if neither (a negative number is none either)."""
    name = "".join("i" if char == "\u0130" else char.lower() for char in text)
    if name in bounds.names:
        return bounds.names[name]
    if not _GO_INT.fullmatch(text) or int(text) < 0 or int(text) > _GO_INT_MAX:
        return None
    return int(text)


def _what_it_takes(bounds: _Bounds) -> str:
    if not bounds.names:
        return f"a number {bounds.low}-{bounds.high}, a range or *"
    first, *_, last = bounds.names
    return (
        f"a number {bounds.low}-{bounds.high}, a name {first.upper()}-{last.upper()}, a range or *"
    )


def budget_schedule(schedule: str) -> CronSchedule:
    """The schedule of a disruption budget, or ScheduleError with the whole message for the
    operator: robfig/cron must read it, the NodePool CRD's pattern match it, and it must fire."""
    try:
        parsed = parse_schedule(schedule)
    except ScheduleError as error:
        fix = "" if error.has_fix else f". Give five fields, {FIELD_ORDER}, for example {EXAMPLE}"
        raise ScheduleError(
            f"{schedule!r} is no schedule Karpenter can read: {error}; Karpenter parses it with "
            "robfig/cron v3.0.1 (ParseStandard) and, when that fails, allows no disruption of "
            f"the pool's nodes at all (no drift, no consolidation){fix}"
        ) from None
    if not _CRD_SCHEDULE.search(schedule):
        raise ScheduleError(
            f"{schedule!r}: robfig/cron reads it, but the NodePool CRD's pattern does not match "
            "it (a macro must start the text, five fields need spaces or tabs between them), so "
            f"the API server refuses the NodePool; write it as for example {EXAMPLE}"
        )
    if longest_gap(parsed) is None:
        raise ScheduleError(
            f"{schedule!r} never fires (no day and time match it: a date such as February 30, "
            "or an empty list such as ','), and Karpenter then takes the budget as active all "
            "the time: robfig/cron's Next finds no hit within five years and gives the zero "
            "time, which IsActive reads as a hit in the past; pick days that exist in the "
            "months given"
        )
    return parsed


# The days the longest gap is looked for in: 28 years from 2001-01-01 (1461 weeks, with 7 leap
# years), after which weekdays and leap days repeat, so the cycle is exact from 1901 to 2099.
_CYCLE_START = date(2001, 1, 1)
_CYCLE_DAYS = 10227
_MINUTES_PER_DAY = 24 * 60


@cache
def _cycle() -> tuple[tuple[int, int, int], ...]:
    """(month, day, weekday with Sunday 0) of each day of the cycle."""
    days = (_CYCLE_START + timedelta(days=n) for n in range(_CYCLE_DAYS))
    return tuple((d.month, d.day, d.isoweekday() % 7) for d in days)


@cache
def longest_gap(schedule: CronSchedule) -> timedelta | None:
    """The longest time between two consecutive hits of the schedule (None: it never fires).
    A budget is active while a hit lies within its duration before now (IsActive), so one
    whose duration is at least this long applies all the time."""
    times = schedule.times_of_day()
    days = [n for n, day in enumerate(_cycle()) if schedule.fires_on(*day)]
    if not times or not days:
        return None
    within_a_day = max((b - a for a, b in pairwise(times)), default=0)
    between_days = max(
        (later - day) * _MINUTES_PER_DAY - times[-1] + times[0]
        for day, later in zip(days, [*days[1:], days[0] + _CYCLE_DAYS], strict=True)
    )
    return timedelta(minutes=max(within_a_day, between_days))


def karpenter_duration(span: timedelta) -> str:
    """A span as a Karpenter duration of hours and minutes: 166h, 1h30m, 45m."""
    hours, minutes = divmod(int(span.total_seconds()) // 60, 60)
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m")) if n) or "0m"
