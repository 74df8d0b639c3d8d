"""Errors of the ``specgen`` CLI."""

__all__ = ["CLIError"]


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""
