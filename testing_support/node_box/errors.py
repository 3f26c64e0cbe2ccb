"""The node box's two ways of not working, which tests treat differently."""

from __future__ import annotations


class Unavailable(RuntimeError):
    """A prerequisite of the box is missing on this machine (a Debian package, root, the host
    kernel): the tests skip and say which, except under CI=true, where they fail."""


class BuildError(RuntimeError):
    """Building the image failed with every prerequisite there: always a failure."""
