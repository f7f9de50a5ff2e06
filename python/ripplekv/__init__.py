"""Python client of the RippleKV calibration scheduler (docs/PYTHON.md).

    import ripplekv
    with ripplekv.Client("127.0.0.1:50051") as c:
        job = c.submit(model_path="model.gguf", samples=8)
        c.wait(job.job_id)
        m = c.budget_map(job.model_hash, ripplekv.BudgetParams(average_tokens=256, ratio=4))

The generated stubs are `ripplekv.v1` (calibration_pb2, rollout_pb2, ...), built from the
repository's proto/ when the package is installed.
"""

from ripplekv.client import Client, model_hash, read_token_file
from ripplekv.errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    JobFailed,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    RippleKVError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from ripplekv.types import (
    BudgetMap,
    BudgetParams,
    ErrorInfo,
    Job,
    JobEvent,
    JobProgress,
    JobProgressEvent,
    JobSnapshot,
    JobStateChange,
    JobWarning,
    LayerSensitivity,
    MapVersion,
    Profile,
    Rollout,
    RolloutNode,
)

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AlreadyExists", "BudgetMap", "BudgetParams", "Cancelled", "Client", "DataLoss",
    "DeadlineExceeded", "ErrorInfo", "FailedPrecondition", "Internal", "InvalidArgument", "Job",
    "JobEvent", "JobFailed", "JobProgress", "JobProgressEvent", "JobSnapshot", "JobStateChange",
    "JobWarning", "LayerSensitivity", "MapVersion", "NotFound", "OutOfRange", "PermissionDenied",
    "Profile", "ResourceExhausted", "RippleKVError", "Rollout", "RolloutNode", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown", "model_hash", "read_token_file",
]
