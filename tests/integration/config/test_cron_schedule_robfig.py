"""config/cron_schedule.py against robfig/cron v3.0.1 itself (testing_support/cron_probe: the
real parser, called as Karpenter v1.14.1 calls it, and the NodePool CRD's pattern in Go's
regexp): on hand-picked edges and on generated schedules, the same ones are refused, the same
ones never fire, and the longest gap between hits is the same. Without Go these tests skip and
say why; under CI=true they fail instead."""

from __future__ import annotations

import os
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from config.cron_schedule import (
    _CRD_SCHEDULE,
    ScheduleError,
    longest_gap,
    parse_schedule,
)
from testing_support.cron_probe import BuildError, build, probe

pytestmark = pytest.mark.integration

EDGES = [
    *("0 4 * * 0", "0 4 * * 7", "0 26 * * 0", "every sunday at two am", "0 0 4 * * *"),
    *("@daily", "@midnight", "@hourly", "@weekly", "@monthly", "@yearly", "@annually"),
    *("@DAILY", "@dailyx", "@daily ", " @daily", "@every 1h", "@every 1h     ", "@every"),
    *("TZ=Europe/Berlin 0 4 * * *", "CRON_TZ=UTC 0 4 * * *", "TZ=Mars/Phobos @daily"),
    *("0 4 * * SUN", "0 4 * * sun", "0 4 * * Sun-Sat", "0 4 * * FRİ", "0 4 * JAN,feb *"),
    *("*/15 2-4 * * 1-5", "0 4 * * 5-2", "0 4 ? * *", "0 4 * * */2", "0 4 * * 3/2"),
    *("0-59/0 * * * *", "+5 * * * *", "05 * * * *", "0 4 1-3-4 * *", "*-3 * * * *"),
    *("0 4 * * ,1", "0 4 * * 1,", "0 4 * * ,", ", * * * *", "*/5/2 * * * *", "1-* * * * *"),
    *("0 4 31 2 *", "0 4 30 2 *", "0 4 29 2 *", "0 4 31 4,6 *", "0 4 31 2 MON", "0 0 13 * 5"),
    *("0x1 * * * *", "*/-1 * * * *", "*/+2 * * * *", "-0 * * * *", "*/9" + "9" * 20 + " * * * *"),
    *("0 4 * * *\n", "0\t4\t*\t*\t*", "0 4 * *\v*", "0 4 * *\u00a0*", "0  4 * * *", ""),
    *("0 4 * * 0-6/7", "0 4 * 12/5 *", "59 23 31 12 6", "0 0 1 1 *", "* * * * *"),
]

# What each field's tokens are drawn from: valid values and ranges, edges just outside them,
# names and the shapes getRange reads (steps, star ranges, lists, empties).
_TOKENS: dict[str, list[str]] = {
    "minute": ["0", "59", "60", "*/15", "5-10", "10-5", "*/0", "30/7", "0,30", "x", ","],
    "hour": ["0", "4", "23", "24", "2-4", "*/6", "?", "22-23,0-1", "*-3"],
    "dom": ["1", "31", "0", "32", "29", "30", "*", "?", "1-7", "15/10", "31,1"],
    "month": ["*", "1", "2", "12", "13", "0", "FEB", "jan-mar", "apr,jun", "2/12", "dec-jan"],
    "dow": ["*", "0", "6", "7", "SUN", "mon-fri", "sat,sun", "1/3", "?", "*/2", "fri-mon", "-1"],
}


def generated(count: int, seed: int = 47) -> list[str]:
    chooser = random.Random(seed)
    return [" ".join(chooser.choice(tokens) for tokens in _TOKENS.values()) for _ in range(count)]


SCHEDULES = EDGES + generated(600)


@pytest.fixture(scope="module")
def answers() -> dict[str, dict[str, Any]]:
    try:
        binary: Path = build()
    except BuildError as error:
        if os.environ.get("CI"):
            pytest.fail(f"cron_probe: {error}")
        pytest.skip(f"cron_probe cannot be built: {error}")
    return dict(zip(SCHEDULES, probe(binary, SCHEDULES), strict=True))


def test_the_same_schedules_are_refused(answers: dict[str, dict[str, Any]]) -> None:
    differ = []
    for schedule, answer in answers.items():
        try:
            parse_schedule(schedule)
            ours = None
        except ScheduleError as error:
            ours = str(error)
        # @every is a ConstantDelaySchedule robfig/cron reads; parse_schedule refuses it.
        theirs_refused = bool(answer["error"]) or answer["every"]
        if (ours is not None) != theirs_refused:
            differ.append((schedule, answer["error"], ours))
    assert not differ
    assert sum(bool(a["error"]) for a in answers.values()) > 100  # both sides are exercised
    assert sum(not a["error"] for a in answers.values()) > 100


def test_the_crd_pattern_matches_as_go_regexp_does(answers: dict[str, dict[str, Any]]) -> None:
    differ = [s for s, a in answers.items() if bool(_CRD_SCHEDULE.search(s)) != a["crd"]]
    assert not differ


def test_fires_and_longest_gaps_are_robfigs(answers: dict[str, dict[str, Any]]) -> None:
    differ = []
    for schedule, answer in answers.items():
        if answer["error"] or answer["every"]:
            continue
        gap = longest_gap(parse_schedule(schedule))
        if (gap is not None) != answer["fires"]:
            differ.append((schedule, answer, gap))
        elif gap is not None and answer["complete"]:
            if gap != timedelta(minutes=answer["gap_minutes"]):
                differ.append((schedule, answer, gap))
        elif gap is not None and gap < timedelta(minutes=answer["gap_minutes"]):
            differ.append((schedule, answer, gap))  # a dense schedule's walk stopped early
    assert not differ
    assert sum(not a["fires"] for a in answers.values() if not a["error"]) >= 5
