"""CloudFormation stacks of one environment: network, then cluster."""
