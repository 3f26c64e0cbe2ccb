"""Regions and the letters of their Availability Zones, so a zone that does not exist fails at
synth instead of at deploy time.

Taken on 2026-11-30 from "AWS Availability Zones" in the AWS Regions and Availability Zones guide
(https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html),
which lists every zone (AZ ID) per Region; the region names match botocore's EC2 endpoints
(tests/unit/config/test_fact_tables.py fails when they drift apart).

In the oldest Regions (marked below) AWS maps zone letters to physical zones per account and
older accounts may see a letter that newer ones do not (and vice versa), so those entries list
every letter any account can see; `aws ec2 describe-availability-zones --region R` shows yours.

To add a Region or a zone: add or extend its entry (letters in order), citing the same page.
"""

from __future__ import annotations

import difflib

AVAILABILITY_ZONE_LETTERS: dict[str, str] = {
    "af-south-1": "abc",
    "ap-east-1": "abc",
    "ap-east-2": "abc",
    "ap-northeast-1": "abcd",  # independently mapped per account
    "ap-northeast-2": "abcd",
    "ap-northeast-3": "abc",
    "ap-south-1": "abc",
    "ap-south-2": "abc",
    "ap-southeast-1": "abc",  # independently mapped per account
    "ap-southeast-2": "abc",  # independently mapped per account
    "ap-southeast-3": "abc",
    "ap-southeast-4": "abc",
    "ap-southeast-5": "abc",
    "ap-southeast-6": "abc",
    "ap-southeast-7": "abc",
    "ca-central-1": "abd",  # there is no ca-central-1c
    "ca-west-1": "abc",
    "eu-central-1": "abc",
    "eu-central-2": "abc",
    "eu-north-1": "abc",
    "eu-south-1": "abc",
    "eu-south-2": "abc",
    "eu-west-1": "abc",  # independently mapped per account
    "eu-west-2": "abc",
    "eu-west-3": "abc",
    "il-central-1": "abc",
    "me-central-1": "abc",
    "me-south-1": "abc",
    "mx-central-1": "abc",
    "sa-east-1": "abc",  # independently mapped per account
    "us-east-1": "abcdef",  # independently mapped per account
    "us-east-2": "abc",
    "us-west-1": "abc",  # independently mapped: each account sees two of the three letters
    "us-west-2": "abcd",  # independently mapped per account
}


def availability_zones(region: str) -> list[str]:
    """Every zone name an account may see in the region; empty for an unknown region."""
    return [region + letter for letter in AVAILABILITY_ZONE_LETTERS.get(region, "")]


def region_problem(region: str) -> str | None:
    """Why `region` cannot be used, in plain words, or None."""
    if region in AVAILABILITY_ZONE_LETTERS:
        return None
    close = difflib.get_close_matches(region, list(AVAILABILITY_ZONE_LETTERS), n=1)
    example = f"did you mean {close[0]}?" if close else "for example us-west-2 or eu-central-1"
    return (
        f"{region!r} is not an AWS Region this project knows ({example}); a new Region goes "
        "into config/aws_regions.py"
    )
