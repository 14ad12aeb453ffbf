"""KvCacheError: a failed kvcache call, with the message the library gave
in that same call."""
from ._capi import lib
from ._types import Status

__all__ = ["KvCacheError", "check", "status_string"]


class KvCacheError(Exception):
    """A failed call: `status` (a Status), `message` (what the library or
    the binding said: the argument and the value at fault) and `op` (the C
    function, e.g. "kvc_sequence_add")."""

    def __init__(self, status, message, op):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        self.op = op
        super().__init__(status, message, op)

    def __str__(self):
        name = self.status.name if isinstance(self.status, Status) else str(self.status)
        return "%s: KVC_ERR_%s: %s" % (self.op, name, self.message)

    def __repr__(self):
        return "KvCacheError(%r, %r, %r)" % (self.status, self.message, self.op)


_message = lib.kvc_last_error_message


def check(status, op):
    """Raises KvCacheError unless status is KVC_OK. Called right after the C
    call, on the thread that made it: kvc_last_error_message() is
    thread-local and valid until that thread's next kvcache call."""
    if status != 0:
        raise KvCacheError(status, _message().decode("utf-8", "replace"), op)


def invalid(op, message):
    """A KvCacheError(INVALID_ARGUMENT) raised by the binding's own checks,
    before any C call (nothing changed)."""
    return KvCacheError(Status.INVALID_ARGUMENT, message, op)


def status_string(status):
    """kvc_status_string(): "KVC_ERR_NOT_FOUND"."""
    return lib.kvc_status_string(int(status)).decode()
