"""The one exception type for user errors: the CLI prints its message on one line and exits non-zero."""
import errno


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


def os_error_message(e: OSError) -> str:
    """An OSError (permissions, space, a file where a folder belongs...) as one line: the path, what is wrong,
    and what to do about it."""

    path = e.filename if e.filename is not None else "?"
    if e.filename2 is not None:
        path = f"{path} -> {e.filename2}"
    what = {
        errno.EEXIST: "a file is in the way where mepgen needs a folder: move it away (or delete it), then rerun",
        errno.ENOTDIR: "part of this path is a file where mepgen needs a folder: move that file away, then rerun",
        errno.EISDIR: "a folder is in the way where mepgen needs a file: move it away (or delete it), then rerun",
        errno.EACCES: "permission denied: make it (and its folder) writable for you, or copy the application "
                      "somewhere you can write, then rerun",
        errno.EPERM: "operation not permitted: make it (and its folder) writable for you, or copy the "
                     "application somewhere you can write, then rerun",
        errno.EROFS: "read-only file system: copy the application somewhere writable, then rerun",
        errno.ENOSPC: "no space left on the device: free some space, then rerun (no file was left half-written)",
        errno.EDQUOT: "disk quota exceeded: free some space, then rerun (no file was left half-written)",
        errno.ENOENT: "no such file or folder",
        errno.ENAMETOOLONG: "the path is too long for the file system",
        errno.EMFILE: "too many open files: raise the limit (ulimit -n), then rerun",
    }.get(e.errno, f"{e.strerror or e}")
    return what if e.filename is None else f"{path}: {what}"
