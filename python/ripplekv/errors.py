"""Exceptions of the RippleKV client, one per gRPC status code (docs/ERRORS.md, docs/API.md).

Every failed call raises a subclass of RippleKVError carrying the server's code and message
unchanged. The class says what the caller should do next, as docs/ERRORS.md's table does:
InvalidArgument, FailedPrecondition, NotFound, AlreadyExists, Unauthenticated and
PermissionDenied never succeed when retried as they are; Unavailable, DeadlineExceeded, Aborted and
ResourceExhausted may (with backoff, or smaller).
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class RippleKVError(Exception):
    """A failed call: `code` (a grpc.StatusCode) and `message` (the server's, one line)."""

    #: Whether retrying the same call later may succeed (docs/ERRORS.md, "the caller should").
    retryable: bool = False

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class InvalidArgument(RippleKVError, ValueError):
    """A request field is missing or out of range; the message names it. Fix the request."""


class FailedPrecondition(RippleKVError):
    """The request is valid but the state forbids it (a finished rollout, a partial profile)."""


class NotFound(RippleKVError):
    """Unknown job id, model hash, profile version, map version or rollout id."""


class AlreadyExists(RippleKVError):
    """An idempotency key reused with a different spec."""


class Unauthenticated(RippleKVError):
    """No bearer token, a malformed one or an unknown one (docs/SECURITY.md)."""


class PermissionDenied(RippleKVError):
    """The token is valid but its role may not make this call (the message names both)."""


class ResourceExhausted(RippleKVError):
    """Too big for a limit, or no room now: retry smaller or later."""

    retryable = True


class Unavailable(RippleKVError):
    """The scheduler is unreachable or shutting down (or serves TLS to a plaintext client)."""

    retryable = True


class DeadlineExceeded(RippleKVError):
    """The call's deadline passed."""

    retryable = True


class Aborted(RippleKVError):
    """A concurrent change won a race: re-read and retry."""

    retryable = True


class Internal(RippleKVError):
    """A bug, or a library that should not fail: report it."""


class DataLoss(RippleKVError):
    """Stored data is damaged: stop, the scheduler's database needs repair."""


class Unimplemented(RippleKVError):
    """A method or input this server does not support (version skew)."""


class Cancelled(RippleKVError):
    """The call was cancelled by the caller."""


class OutOfRange(RippleKVError):
    """A value past the end of a valid range."""


class Unknown(RippleKVError):
    """A status the server or the transport did not classify."""


class JobFailed(RippleKVError):
    """Client.wait(): the job ended FAILED (code and message from Job.error) or CANCELLED."""

    def __init__(self, code: grpc.StatusCode, message: str, job: "object") -> None:
        super().__init__(code, message)
        self.job = job  # the final ripplekv.Job


_BY_CODE: Dict[grpc.StatusCode, Type[RippleKVError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNKNOWN: Unknown,
}


def error_class(code: grpc.StatusCode) -> Type[RippleKVError]:
    """The exception class of `code` (Unknown for a code without its own class)."""
    return _BY_CODE.get(code, Unknown)


def status_code(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a numeric code (as in ErrorStatus.code); UNKNOWN when invalid."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN


def from_rpc_error(error: grpc.RpcError, hint: Optional[str] = None) -> RippleKVError:
    """The RippleKVError of a failed call, with the server's code and message (`hint` appended)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    message = message or ""
    if hint:
        message += hint
    return error_class(code)(code, message)
