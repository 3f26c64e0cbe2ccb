"""Stages: one deployable environment (account + region) with all its stacks."""
