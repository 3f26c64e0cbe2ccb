"""How long CloudFormation waits for our custom resources, in plain seconds.

No aws_cdk import: the config model checks the teardown bound against these numbers before any
construct exists, and the constructs build their ServiceTimeout from the same ones.

CloudFormation waits for a custom resource's answer at most its ServiceTimeout, an integer of
1 to 3600 seconds, default 3600 (CloudFormation template reference,
AWS::CloudFormation::CustomResource), whatever the Provider framework's own total timeout.
"""

from __future__ import annotations

SERVICE_TIMEOUT_LIMIT_SECONDS = 3600

# aws-cdk-lib's Provider framework retries a failed invocation of a handler once, after waiting
# up to 300 s for the function to become Active (custom-resources runtime outbound.ts,
# defaultInvokeFunction: waitUntilFunctionActiveV2 maxWaitTime 300), e.g. a function just
# updated or idle long enough for Lambda to reclaim its resources.
FRAMEWORK_ACTIVATION_WAIT_SECONDS = 300
# The framework function's own cold start, its invocation and its PUT of the answer to
# CloudFormation's response URL: seconds in practice; one minute is our allowance.
FRAMEWORK_OVERHEAD_SECONDS = 60

# The teardown's Provider polls isComplete this often, and each of its functions runs at most
# this long (cdk_constructs/karpenter_teardown.py).
TEARDOWN_POLL_INTERVAL_SECONDS = 30
TEARDOWN_FUNCTION_TIMEOUT_SECONDS = 120


def framework_answer_seconds(handler_seconds: int) -> int:
    """Longest time from CloudFormation's request to the framework's answer, for a handler
    invocation that takes at most `handler_seconds`."""
    return FRAMEWORK_OVERHEAD_SECONDS + FRAMEWORK_ACTIVATION_WAIT_SECONDS + handler_seconds


# The teardown handler fixes its deadline when onEvent starts (after at most the framework's
# overhead and activation wait) and reports what is left from the first isComplete poll that
# ends past it: at most one poll interval later, and that poll runs at most the function timeout.
TEARDOWN_MARGIN_SECONDS = framework_answer_seconds(
    TEARDOWN_POLL_INTERVAL_SECONDS + TEARDOWN_FUNCTION_TIMEOUT_SECONDS
)
TEARDOWN_MARGIN_MINUTES = TEARDOWN_MARGIN_SECONDS / 60


def teardown_service_timeout_seconds(timeout_minutes: int) -> int:
    """ServiceTimeout of the teardown resource: its bound plus the framework's margin."""
    return timeout_minutes * 60 + TEARDOWN_MARGIN_SECONDS


# The longest cluster.teardown_timeout_minutes whose ServiceTimeout CloudFormation accepts.
LONGEST_TEARDOWN_TIMEOUT_MINUTES = (SERVICE_TIMEOUT_LIMIT_SECONDS - TEARDOWN_MARGIN_SECONDS) // 60
