"""The one exception type for user errors: the CLI prints its message on one line and exits non-zero."""


class MepgenError(Exception):
    """A problem with the user's input or environment, explained in one line.

    Raised anywhere in mepgen for things the user can fix (a missing path, a malformed file, an unknown
    kernel). The CLI turns it into ``mepgen: <message>`` on stderr and exit code ``exit_code``.
    """

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
