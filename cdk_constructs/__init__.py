"""Our CDK constructs (named so it cannot shadow the `constructs` package aws-cdk-lib imports)."""
