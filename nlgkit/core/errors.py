"""User-facing errors.

Every problem caused by the user's input (a recipe key, a file, a checkpoint) is raised as an
:class:`NlgkitError`; the CLI prints its message on one line and exits non-zero, never a traceback.
"""

from __future__ import annotations


class NlgkitError(Exception):
    """An error the user can fix; its message names the file, line or key at fault."""

    exit_code = 2


class ConfigError(NlgkitError):
    """A recipe or override is invalid (unknown key, wrong type, inconsistent values)."""


class DataError(NlgkitError):
    """An input file or data directory is missing, unreadable or malformed."""


class CheckpointError(NlgkitError):
    """A checkpoint is missing, corrupt, or does not match the data it is used with."""
