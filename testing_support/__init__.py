"""Helpers shared by tests and benchmarks; never imported by the CDK app."""
