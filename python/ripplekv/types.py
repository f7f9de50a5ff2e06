"""Typed results of the RippleKV client: small frozen dataclasses converted from the protos.

Each result keeps the message it came from in `.proto` (every field, e.g. Job.proto.spec), so the
dataclasses hold only what most callers read. Enum values are their names without the prefix
("SUCCEEDED", "RUNNING"); times are timezone-aware datetimes in UTC (None when unset); durations
are seconds as floats (None when unset).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from ripplekv.errors import InvalidArgument, status_code
from ripplekv.v1 import calibration_pb2, rollout_pb2


def _time(message: Any, name: str) -> Optional[_dt.datetime]:
    if not message.HasField(name):
        return None
    ts: timestamp_pb2.Timestamp = getattr(message, name)
    return ts.ToDatetime(tzinfo=_dt.timezone.utc)


def _seconds(message: Any, name: str) -> Optional[float]:
    if not message.HasField(name):
        return None
    d: duration_pb2.Duration = getattr(message, name)
    return d.seconds + d.nanos / 1e9


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    try:
        name: str = enum.Name(value)
    except ValueError:
        return str(value)
    return name[len(prefix):] if name.startswith(prefix) else name


@dataclass(frozen=True)
class ErrorInfo:
    """A failure carried as data (Job.error): `code` a grpc.StatusCode name, and the message."""

    code: str
    message: str


def _error(message: Any, name: str) -> Optional[ErrorInfo]:
    if not message.HasField(name) or getattr(message, name).code == 0:
        return None
    e = getattr(message, name)
    return ErrorInfo(code=status_code(e.code).name, message=e.message)


# ---------------------------------------------------------------------------------------------
# Jobs.

TERMINAL_JOB_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True)
class JobProgress:
    """How far a job is: tasks (one sample x one layer) and trials done over planned."""

    tasks_done: int
    tasks_total: int
    trials_done: int
    trials_total: int
    workers: int  # holding a lease of the job now
    eta_seconds: Optional[float]  # None while unknown
    samples_planned: int
    waiting_reason: str  # why it is not progressing now; "" while it progresses
    proto: calibration_pb2.JobProgress = field(repr=False, compare=False)

    @property
    def fraction(self) -> float:
        """Trials done over trials planned, in [0, 1] (0 while nothing is planned)."""
        return self.trials_done / self.trials_total if self.trials_total > 0 else 0.0

    @staticmethod
    def from_proto(p: calibration_pb2.JobProgress) -> "JobProgress":
        return JobProgress(
            tasks_done=p.tasks_done,
            tasks_total=p.tasks_total,
            trials_done=p.trials_done,
            trials_total=p.trials_total,
            workers=p.workers,
            eta_seconds=_seconds(p, "eta"),
            samples_planned=p.samples_planned,
            waiting_reason=p.waiting_reason,
            proto=p,
        )


@dataclass(frozen=True)
class Job:
    """A calibration job. `state` is PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED."""

    job_id: str
    state: str
    model_hash: str
    progress: JobProgress
    error: Optional[ErrorInfo]  # set when FAILED
    profile_version: int  # the profile it wrote (SUCCEEDED only; 0 otherwise)
    idempotency_key: str
    create_time: Optional[_dt.datetime]
    end_time: Optional[_dt.datetime]
    proto: calibration_pb2.Job = field(repr=False, compare=False)

    @property
    def done(self) -> bool:
        """True in a terminal state (SUCCEEDED, FAILED, CANCELLED)."""
        return self.state in TERMINAL_JOB_STATES

    @staticmethod
    def from_proto(j: calibration_pb2.Job) -> "Job":
        return Job(
            job_id=j.job_id,
            state=_enum_name(calibration_pb2.JobState, j.state, "JOB_STATE_"),
            model_hash=j.spec.model.model_hash,
            progress=JobProgress.from_proto(j.progress),
            error=_error(j, "error"),
            profile_version=j.profile_version,
            idempotency_key=j.idempotency_key,
            create_time=_time(j, "create_time"),
            end_time=_time(j, "end_time"),
            proto=j,
        )


@dataclass(frozen=True)
class JobSnapshot:
    """WatchJob's first event: the job as it is."""

    job_id: str
    time: Optional[_dt.datetime]
    job: Job
    proto: calibration_pb2.JobEvent = field(repr=False, compare=False)


@dataclass(frozen=True)
class JobStateChange:
    """The job moved from `previous` to `current`; `error` is set when `current` is FAILED."""

    job_id: str
    time: Optional[_dt.datetime]
    previous: str
    current: str
    error: Optional[ErrorInfo]
    proto: calibration_pb2.JobEvent = field(repr=False, compare=False)


@dataclass(frozen=True)
class JobProgressEvent:
    """New progress (at most about once a second)."""

    job_id: str
    time: Optional[_dt.datetime]
    progress: JobProgress
    proto: calibration_pb2.JobEvent = field(repr=False, compare=False)


@dataclass(frozen=True)
class JobWarning:
    """Something worth telling that does not change the job's state (a worker lost, ...)."""

    job_id: str
    time: Optional[_dt.datetime]
    message: str
    worker_id: str
    error: Optional[ErrorInfo]
    proto: calibration_pb2.JobEvent = field(repr=False, compare=False)


JobEvent = Union[JobSnapshot, JobStateChange, JobProgressEvent, JobWarning]


def job_event_from_proto(e: calibration_pb2.JobEvent) -> Optional[JobEvent]:
    """The typed event of `e`; None for an event kind this client does not know."""
    kind = e.WhichOneof("event")
    when = _time(e, "event_time")
    if kind == "snapshot":
        return JobSnapshot(e.job_id, when, Job.from_proto(e.snapshot), e)
    if kind == "state_change":
        s = e.state_change
        return JobStateChange(
            e.job_id,
            when,
            _enum_name(calibration_pb2.JobState, s.previous, "JOB_STATE_"),
            _enum_name(calibration_pb2.JobState, s.current, "JOB_STATE_"),
            _error(s, "error"),
            e,
        )
    if kind == "progress":
        return JobProgressEvent(e.job_id, when, JobProgress.from_proto(e.progress), e)
    if kind == "warning":
        w = e.warning
        return JobWarning(e.job_id, when, w.message, w.worker_id, _error(w, "status"), e)
    return None


# ---------------------------------------------------------------------------------------------
# Profiles and budget maps.


@dataclass(frozen=True)
class LayerSensitivity:
    """One layer's sensitivity: mean KL (nats) over samples and trials, its standard error."""

    layer: int
    mean_kl: float
    std_error: float
    count: int  # KL values averaged


@dataclass(frozen=True)
class Profile:
    """One version of a model's sensitivity profile. `layers` is empty in listings."""

    model_hash: str
    version: int
    job_id: str
    create_time: Optional[_dt.datetime]
    n_layers: int  # of the model (0 when unknown)
    data_source: str
    data_domain: str
    tool_version: str
    layers: Tuple[LayerSensitivity, ...]
    proto: calibration_pb2.Profile = field(repr=False, compare=False)

    @staticmethod
    def from_proto(p: calibration_pb2.Profile) -> "Profile":
        return Profile(
            model_hash=p.model_hash,
            version=p.version,
            job_id=p.job_id,
            create_time=_time(p, "create_time"),
            n_layers=p.model.n_layers,
            data_source=p.data_source,
            data_domain=p.data_domain,
            tool_version=p.tool_version,
            layers=tuple(
                LayerSensitivity(l.layer, l.mean_kl, l.std_error, l.count) for l in p.layers
            ),
            proto=p,
        )


@dataclass(frozen=True)
class BudgetParams:
    """How a budget map is computed (proto BudgetParams; `ripplekv budgets`'s flags).

    Exactly one of `average_tokens` (B: average tokens per layer) and `total_tokens` (T) must be
    set. None leaves a field to the server's default. `normalization`: "minmax", "rank" or
    "log-minmax"; `format` (of BudgetMap.formatted_json): "native", "kvpress" (needs
    `context_len`) or "trtllm".
    """

    average_tokens: Optional[int] = None
    total_tokens: Optional[int] = None
    ratio: Optional[float] = None  # most sensitive layer over the least, >= 1; default 2
    min_tokens: Optional[int] = None  # default 1
    max_tokens: Optional[int] = None  # default unbounded
    normalization: Optional[str] = None  # default "minmax"
    context_len: Optional[int] = None  # tokens; required for format "kvpress"
    format: Optional[str] = None  # default "native"
    shrink_z: Optional[float] = None  # default 0 (plain means)
    per_head: bool = False  # budgets per KV head (needs a per-head response profile)

    def to_proto(self) -> calibration_pb2.BudgetParams:
        """The proto; raises ripplekv.InvalidArgument for an unknown name or a bad total."""
        def bad(message: str) -> InvalidArgument:
            return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)

        p = calibration_pb2.BudgetParams()
        if (self.average_tokens is None) == (self.total_tokens is None):
            raise bad("BudgetParams: set exactly one of average_tokens and total_tokens")
        if self.average_tokens is not None:
            p.average_tokens = self.average_tokens
        if self.total_tokens is not None:
            p.total_tokens = self.total_tokens
        for name in ("ratio", "min_tokens", "max_tokens", "context_len", "shrink_z"):
            value = getattr(self, name)
            if value is not None:
                setattr(p, name, value)
        if self.normalization is not None:
            p.normalization = _lookup(
                calibration_pb2.Normalization,
                {"minmax": "MIN_MAX", "rank": "RANK", "log-minmax": "LOG_MIN_MAX"},
                "NORMALIZATION_",
                self.normalization,
                "normalization",
            )
        if self.format is not None:
            p.format = _lookup(
                calibration_pb2.BudgetFormat,
                {"native": "NATIVE", "kvpress": "KVPRESS", "trtllm": "TRTLLM"},
                "BUDGET_FORMAT_",
                self.format,
                "format",
            )
        p.per_head = self.per_head
        return p


def _lookup(enum: Any, names: Dict[str, str], prefix: str, value: str, what: str) -> int:
    """The enum number of a user-facing name; raises InvalidArgument listing the names."""
    key = names.get(value)
    if key is None:
        raise InvalidArgument(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{what}: {value!r} is not one of {', '.join(sorted(names))}",
        )
    number: int = enum.Value(prefix + key)
    return number


@dataclass(frozen=True)
class BudgetMap:
    """Per-layer token budgets computed from a stored profile (GetBudgetMap).

    `tokens[l]` is layer l's budget and sums to `total_tokens`; `head_tokens[l][h]` are the
    budgets of layer l's KV heads for a per-head map (empty otherwise); `formatted_json` is the map
    in the requested format, as `ripplekv budgets --json` prints it.
    """

    model_hash: str
    profile_version: int
    total_tokens: int
    tokens: Tuple[int, ...]
    multipliers: Tuple[float, ...]
    head_tokens: Tuple[Tuple[int, ...], ...]
    formatted_json: str
    proto: calibration_pb2.BudgetMap = field(repr=False, compare=False)

    def document(self) -> Any:
        """formatted_json parsed."""
        return json.loads(self.formatted_json)

    @staticmethod
    def from_proto(m: calibration_pb2.BudgetMap) -> "BudgetMap":
        return BudgetMap(
            model_hash=m.model_hash,
            profile_version=m.profile_version,
            total_tokens=m.total_tokens,
            tokens=tuple(m.tokens),
            multipliers=tuple(m.multipliers),
            head_tokens=tuple(tuple(h.tokens) for h in m.head_tokens),
            formatted_json=m.formatted_json,
            proto=m,
        )


# ---------------------------------------------------------------------------------------------
# Frozen map versions and rollouts.


@dataclass(frozen=True)
class MapVersion:
    """An immutable, content-addressed version of a model's budget map (docs/ROLLOUTS.md).

    `tokens` and `document` are empty in listings. `existing` is True when create_map_version
    found the same inputs frozen before (always False from get and list).
    """

    model_hash: str
    version: str  # 16 hex digits
    sequence: int
    profile_version: int
    total_tokens: int
    tokens: Tuple[int, ...]
    selection_method: str
    selection_params: Dict[str, str]
    document: str
    create_time: Optional[_dt.datetime]
    existing: bool
    proto: rollout_pb2.BudgetMapVersion = field(repr=False, compare=False)

    @staticmethod
    def from_proto(m: rollout_pb2.BudgetMapVersion, existing: bool = False) -> "MapVersion":
        return MapVersion(
            model_hash=m.model_hash,
            version=m.version,
            sequence=m.sequence,
            profile_version=m.profile_version,
            total_tokens=m.total_tokens,
            tokens=tuple(m.tokens),
            selection_method=m.selection.method,
            selection_params=dict(m.selection.params),
            document=m.document,
            create_time=_time(m, "create_time"),
            existing=existing,
            proto=m,
        )


@dataclass(frozen=True)
class RolloutNode:
    """One serving node's state in a rollout. `state`: PENDING, APPLIED or FAILED."""

    node_id: str
    in_rollout: bool
    assigned_version: str
    held_version: str
    state: str
    error: str
    connected: bool


def _stage_text(s: rollout_pb2.RolloutStage) -> str:
    return f"{s.percent:g}%" if s.WhichOneof("size") == "percent" else str(s.nodes)


@dataclass(frozen=True)
class Rollout:
    """A rollout of a map version. `state`: RUNNING, PAUSED, SUCCEEDED or ROLLED_BACK.

    `stages` are as start_rollout takes them ("1", "10%"); `nodes` is empty in listings.
    """

    rollout_id: str
    model_hash: str
    map_version: str
    previous_version: str
    state: str
    stage: int
    stages: Tuple[str, ...]
    pause_reason: str
    stage_nodes: int
    acknowledged: int
    pending: int
    failed: int
    connected_nodes: int
    nodes: Tuple[RolloutNode, ...]
    create_time: Optional[_dt.datetime]
    update_time: Optional[_dt.datetime]
    proto: rollout_pb2.Rollout = field(repr=False, compare=False)

    @staticmethod
    def from_proto(r: rollout_pb2.Rollout) -> "Rollout":
        return Rollout(
            rollout_id=r.rollout_id,
            model_hash=r.model_hash,
            map_version=r.map_version,
            previous_version=r.previous_version,
            state=_enum_name(rollout_pb2.RolloutState, r.state, "ROLLOUT_STATE_"),
            stage=r.stage,
            stages=tuple(_stage_text(s) for s in r.stages),
            pause_reason=r.pause_reason,
            stage_nodes=r.stage_nodes,
            acknowledged=r.acknowledged,
            pending=r.pending,
            failed=r.failed,
            connected_nodes=r.connected_nodes,
            nodes=tuple(
                RolloutNode(
                    node_id=n.node_id,
                    in_rollout=n.in_rollout,
                    assigned_version=n.assigned_version,
                    held_version=n.held_version,
                    state=_enum_name(rollout_pb2.NodeMapState, n.state, "NODE_MAP_STATE_"),
                    error=n.error,
                    connected=n.connected,
                )
                for n in r.nodes
            ),
            create_time=_time(r, "create_time"),
            update_time=_time(r, "update_time"),
            proto=r,
        )


__all__ = [
    "BudgetMap",
    "BudgetParams",
    "ErrorInfo",
    "Job",
    "JobEvent",
    "JobProgress",
    "JobProgressEvent",
    "JobSnapshot",
    "JobStateChange",
    "JobWarning",
    "LayerSensitivity",
    "MapVersion",
    "Profile",
    "Rollout",
    "RolloutNode",
    "TERMINAL_JOB_STATES",
    "job_event_from_proto",
]
