"""The one exception a user can cause. The CLI turns it into one line on stderr and exit code 2."""


class UserError(Exception):
    """Bad input, a missing file, a bad option: something the user can fix."""
