"""NativeHandle: what Cache and StatefulCache share about owning a C
handle: calls that raise KvCacheError with the message of their own
failing call, an idempotent close() that waits for calls other threads
have in flight, the context manager, and the refusal of any call after
close()."""
import threading
import time

from ._capi import lib
from ._types import Status
from .errors import KvCacheError

__all__ = ["NativeHandle"]

_message = lib.kvc_last_error_message


class NativeHandle:
    """Base of the handle classes. A subclass sets _NAME (for "use of a
    closed Cache") and _DESTROY (the kvc_x_destroy function), and calls
    _init_handle() before it creates the handle."""
    _NAME = "handle"
    _DESTROY = None

    def _init_handle(self):
        self._handle = None
        self._inflight = []
        self._close_lock = threading.Lock()

    # -- calls ---------------------------------------------------------------
    def _call(self, op, fn, *args):
        """fn(handle, *args) for C function `op`; raises KvCacheError on a
        failure, with the message read right after the call."""
        self._inflight.append(None)
        try:
            handle = self._handle
            if handle is None:
                raise KvCacheError(Status.INVALID_STATE, "use of a closed " + self._NAME, op)
            status = fn(handle, *args)
        finally:
            self._inflight.pop()
        if status != 0:
            raise KvCacheError(status, _message().decode("utf-8", "replace"), op)

    def _status(self, op, fn, *args):
        """As _call, but returns the status (and the message when it is
        not KVC_OK) for the calls where a refusal is an answer."""
        self._inflight.append(None)
        try:
            handle = self._handle
            if handle is None:
                raise KvCacheError(Status.INVALID_STATE, "use of a closed " + self._NAME, op)
            status = fn(handle, *args)
        finally:
            self._inflight.pop()
        return status, (_message().decode("utf-8", "replace") if status != 0 else "")

    # -- lifetime ------------------------------------------------------------
    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Frees the handle and its memory; idempotent. Waits for calls
        other threads have in flight; later calls raise KvCacheError."""
        with self._close_lock:
            handle, self._handle = self._handle, None
            if handle is None:
                return
            while self._inflight:
                time.sleep(0)  # yield to the threads finishing their call
            type(self)._DESTROY(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # No finalizer semantics are promised; this only avoids a leak
        # when an object is dropped without close().
        if getattr(self, "_handle", None) is not None:
            self.close()
