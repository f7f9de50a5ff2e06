"""The RippleKV client: calibration jobs, profiles, budget maps, map versions and rollouts.

One Client holds one gRPC channel to a scheduler (`ripplekv-scheduler`), configured as the
`ripplekv` CLI configures its own (proto/client_channel.cc; docs/SECURITY.md, docs/API.md):

- TLS when `tls_ca` is given (the CA that signed the server's certificate), with a client
  certificate (`tls_cert` and `tls_key`) for mTLS; plaintext otherwise, which a scheduler serves
  on loopback only.
- `token_file`: the token on its first line (surrounding whitespace trimmed) is sent as
  `authorization: Bearer <token>` on every call. Without TLS the channel uses gRPC's local TCP
  credentials, as the CLI does (loopback targets only).
- Unary calls carry a deadline (`timeout`, SubmitJob 60 s); keepalive every 20 s.

Every failed call raises a ripplekv.errors.RippleKVError subclass with the server's code and
message (docs/ERRORS.md). A Client may be used from several threads (gRPC channels are
thread-safe); close() it, or use it as a context manager.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Union

import grpc

from ripplekv import errors
from ripplekv.errors import InvalidArgument, JobFailed, RippleKVError, Unavailable
from ripplekv.types import (
    BudgetMap,
    BudgetParams,
    Job,
    JobEvent,
    JobProgress,
    JobProgressEvent,
    JobSnapshot,
    JobStateChange,
    MapVersion,
    Profile,
    Rollout,
    _lookup,
    job_event_from_proto,
)
from ripplekv.v1 import calibration_pb2, calibration_pb2_grpc, rollout_pb2, rollout_pb2_grpc

_log = logging.getLogger("ripplekv")

#: Deadline of unary calls, seconds (docs/API.md, "Deadlines").
DEFAULT_TIMEOUT = 10.0
#: Deadline of SubmitJob, which may carry 32 MiB of inline data, seconds.
SUBMIT_TIMEOUT = 60.0
_MAX_FILE_BYTES = 1 << 20

# The CLI's hint for a plaintext client of a TLS port (proto/client_channel.h, kTlsHint).
_TLS_HINT = (
    " (the scheduler may be serving TLS: pass tls_ca with the CA that signed its certificate, "
    "and tls_cert/tls_key if it requires client certificates; docs/SECURITY.md)"
)


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)


def _read_file(path: Union[str, os.PathLike], what: str) -> bytes:
    """The bytes of a small file; NotFound / PermissionDenied / InvalidArgument naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise errors.NotFound(grpc.StatusCode.NOT_FOUND, f"{what} {path}: no such file") from None
    except PermissionError:
        raise errors.PermissionDenied(
            grpc.StatusCode.PERMISSION_DENIED, f"{what} {path}: permission denied"
        ) from None
    except IsADirectoryError:
        raise _bad(f"{what} {path}: is a directory") from None
    if len(data) > _MAX_FILE_BYTES:
        raise errors.ResourceExhausted(
            grpc.StatusCode.RESOURCE_EXHAUSTED, f"{what} {path}: over {_MAX_FILE_BYTES} bytes"
        )
    return data


def _warn_if_shared(path: Union[str, os.PathLike], what: str) -> None:
    """Logs a warning when others may read or write a secret file (docs/SECURITY.md)."""
    try:
        st = os.stat(path)
    except OSError:
        return
    mode = stat.S_IMODE(st.st_mode)
    group_read_ok = st.st_uid == 0
    if mode & 0o007 or mode & 0o020 or (mode & 0o040 and not group_read_ok):
        _log.warning(
            "%s %s: mode %04o lets other users of the machine read or write it; run `chmod 600 %s`",
            what, path, mode, path,
        )


def read_token_file(path: Union[str, os.PathLike]) -> str:
    """The token of a token file: its first line, whitespace trimmed.

    Raises InvalidArgument when that line is empty, NotFound / PermissionDenied when the file
    cannot be read. Warns (logging) when others may read the file. The token is never logged.
    """
    text = _read_file(path, "token_file").decode("utf-8", errors="replace")
    _warn_if_shared(path, "token_file")
    token = text.split("\n", 1)[0].strip()
    if not token:
        raise _bad(f"{path}: the first line holds no token")
    return token


def model_hash(path: Union[str, os.PathLike]) -> str:
    """The model hash of docs/MODEL_HASH.md: SHA-256 of a GGUF file, of a directory's
    model.safetensors, or of the manifest of a sharded directory's index. Raises NotFound or
    InvalidArgument (naming the path) when `path` is none of these."""

    def sha256(p: Path) -> str:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    p = Path(path)
    if p.is_file():
        return sha256(p)
    if p.is_dir():
        if (p / "model.safetensors").is_file():
            return sha256(p / "model.safetensors")
        index = p / "model.safetensors.index.json"
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()),
                            key=lambda s: s.encode())
            for s in shards:
                if "/" in s or "\\" in s or "\n" in s or s in (".", ".."):
                    raise _bad(f"{index}: shard name {s!r} is not a plain file name")
            manifest = "".join(f"{sha256(p / s)}  {s}\n" for s in shards)
            return hashlib.sha256(manifest.encode()).hexdigest()
        raise _bad(f"{p}: no model.safetensors or model.safetensors.index.json")
    raise errors.NotFound(grpc.StatusCode.NOT_FOUND, f"{p}: no such file or directory")


_hash_of = model_hash  # submit() has a parameter of the same name


def _parse_stage(stage: Union[int, float, str]) -> rollout_pb2.RolloutStage:
    """A stage: an int (nodes) or "N%" (a share of the model's connected nodes)."""
    if isinstance(stage, str) and stage.endswith("%"):
        try:
            return rollout_pb2.RolloutStage(percent=float(stage[:-1]))
        except ValueError:
            raise _bad(f"stages: {stage!r} is not a number of nodes or a percentage") from None
    try:
        nodes = int(stage)
    except (TypeError, ValueError):
        raise _bad(f"stages: {stage!r} is not a number of nodes or a percentage") from None
    return rollout_pb2.RolloutStage(nodes=nodes)


def _duration(seconds: float) -> Any:
    from google.protobuf import duration_pb2

    d = duration_pb2.Duration()
    d.FromNanoseconds(int(round(seconds * 1e9)))
    return d


class Client:
    """A connection to a RippleKV scheduler at `address` ("host:port").

    TLS and token options mirror the CLI's --tls-ca, --tls-cert, --tls-key, --tls-server-name
    and --token-file. Raises InvalidArgument for a certificate without its key (or the reverse)
    or a client certificate without `tls_ca`, and the errors of reading the files. Connecting is
    lazy: an unreachable scheduler surfaces as Unavailable on the first call.
    """

    def __init__(
        self,
        address: str,
        *,
        tls_ca: Optional[Union[str, os.PathLike]] = None,
        tls_cert: Optional[Union[str, os.PathLike]] = None,
        tls_key: Optional[Union[str, os.PathLike]] = None,
        tls_server_name: Optional[str] = None,
        token_file: Optional[Union[str, os.PathLike]] = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise _bad("tls_cert and tls_key go together")
        if tls_cert is not None and tls_ca is None:
            raise _bad("tls_cert needs tls_ca (the server's CA)")
        self.address = address
        self.timeout = timeout
        self._plaintext = tls_ca is None
        token = read_token_file(token_file) if token_file is not None else None
        self._metadata = [("authorization", "Bearer " + token)] if token else []
        options: List[tuple] = [
            ("grpc.keepalive_time_ms", 20000),
            ("grpc.keepalive_timeout_ms", 10000),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 5000),
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 33 << 20),
        ]
        if tls_ca is not None:
            ca = _read_file(tls_ca, "tls_ca")
            cert = _read_file(tls_cert, "tls_cert") if tls_cert is not None else None
            key = _read_file(tls_key, "tls_key") if tls_key is not None else None
            if tls_key is not None:
                _warn_if_shared(tls_key, "tls_key")
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            credentials = grpc.ssl_channel_credentials(ca, key, cert)
            self._channel = grpc.secure_channel(address, credentials, options=options)
        elif token:
            # A token-checking scheduler on loopback serves local TCP credentials; the token rides
            # as call metadata (gRPC's call credentials need a secure channel).
            credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._calibration = calibration_pb2_grpc.CalibrationServiceStub(self._channel)
        self._rollout = rollout_pb2_grpc.RolloutServiceStub(self._channel)

    # -- plumbing --------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; calls in flight end with Cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, error: grpc.RpcError) -> RippleKVError:
        hint = None
        if self._plaintext and error.code() == grpc.StatusCode.UNAVAILABLE:
            details = error.details() or ""
            if "failed to connect" in details and any(
                s in details for s in ("Socket closed", "Connection reset", "connection reset")
            ):
                hint = _TLS_HINT
        return errors.from_rpc_error(error, hint)

    def _call(self, method: Callable[..., Any], request: Any, timeout: Optional[float] = None) -> Any:
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _all_pages(self, method: Callable[..., Any], request: Any, items: str) -> List[Any]:
        """Every item of a paged List call (the response's repeated field `items`), following
        next_page_token until it is empty; `request` is updated in place."""
        out: List[Any] = []
        while True:
            response = self._call(method, request)
            out.extend(getattr(response, items))
            if not response.next_page_token:
                return out
            request.page_token = response.next_page_token

    # -- jobs ------------------------------------------------------------------------------

    def submit(
        self,
        model_hash: Optional[str] = None,
        *,
        model_path: Optional[Union[str, os.PathLike]] = None,
        model_name: str = "",
        n_layers: int = 0,
        builtin: Optional[str] = None,
        text: Optional[str] = None,
        jsonl: Optional[Sequence[str]] = None,
        data_path: Optional[str] = None,
        data_format: Optional[str] = None,
        strict: bool = False,
        samples: Optional[int] = None,
        context_len: Optional[int] = None,
        probe_len: Optional[int] = None,
        layers: Optional[Iterable[int]] = None,
        trials: Optional[int] = None,
        alpha: Optional[float] = None,
        seed: int = 0,
        data_seed: int = 0,
        mode: Optional[str] = None,
        objective: Optional[str] = None,
        selector: Optional[str] = None,
        budgets: Optional[Iterable[int]] = None,
        per_head: int = 0,
        until_stable: bool = False,
        max_samples: Optional[int] = None,
        priority: int = 0,
        verify: Optional[float] = None,
        idempotency_key: str = "",
    ) -> Job:
        """Queues a calibration job, as `ripplekv submit`; returns the job (PENDING).

        The model is `model_hash` (64 hex digits), or computed from `model_path` (a GGUF file or
        a safetensors directory this machine can read; docs/MODEL_HASH.md). `n_layers` is needed
        while no worker holding the model has registered. Data: at most one of `builtin` (a
        built-in set: "mixed", "sherlock-holmes", "tom-sawyer", "code", "docs"), `text` (inline
        plain text), `jsonl` (inline JSONL lines) and `data_path` (a path workers read under their
        --data-dir; `data_format` "jsonl" or "text"); none: "mixed". Method parameters are
        `ripplekv calibrate`'s (None: its default): `mode` "cache"/"prefill", `objective`
        "noise"/"response", `selector` "snapkv"/"h2o"/"streaming", `budgets` the response grid,
        `per_head` the model's KV heads for a per-head response (0: per layer). `verify`: the
        fraction of tasks verified on a second worker (None: the scheduler's default).

        Raises InvalidArgument (bad or conflicting parameters, checked here or by the server),
        AlreadyExists (idempotency key reused with another spec), ResourceExhausted (inline data
        over 32 MiB), and the transport's errors.
        """
        if model_hash is None:
            if model_path is None:
                raise _bad("submit: give model_hash or model_path")
            model_hash = _hash_of(model_path)
        sources = [s for s in (builtin, text, jsonl, data_path) if s is not None]
        if len(sources) > 1:
            raise _bad("submit: give at most one of builtin, text, jsonl and data_path")
        if data_format is not None and data_path is None:
            raise _bad("submit: data_format is for data_path only")
        spec = calibration_pb2.JobSpec(priority=priority)
        spec.model.model_hash = model_hash
        spec.model.n_layers = n_layers
        spec.model.name = model_name
        if model_path is not None:
            spec.model.path = os.path.abspath(model_path)
        if builtin is not None:
            spec.data.builtin = builtin
        elif text is not None:
            spec.data.text = text
        elif jsonl is not None:
            spec.data.jsonl.lines.extend(jsonl)
        elif data_path is not None:
            spec.data.path = data_path
            if data_format is not None:
                spec.data.format = _lookup(
                    calibration_pb2.DataFormat, {"jsonl": "JSONL", "text": "TEXT"},
                    "DATA_FORMAT_", data_format, "data_format",
                )
        spec.data.strict = strict
        p = spec.params
        for name, value in (("samples", samples), ("context_len", context_len),
                            ("probe_len", probe_len), ("trials", trials), ("alpha", alpha),
                            ("max_samples", max_samples)):
            if value is not None:
                setattr(p, name, value)
        p.seed = seed
        p.data_seed = data_seed
        p.until_stable = until_stable
        p.kv_heads = per_head
        if layers is not None:
            p.layers.extend(layers)
        if budgets is not None:
            p.budgets.extend(budgets)
        if mode is not None:
            p.mode = _lookup(calibration_pb2.PerturbMode, {"cache": "CACHE", "prefill": "PREFILL"},
                             "PERTURB_MODE_", mode, "mode")
        if objective is not None:
            p.objective = _lookup(calibration_pb2.Objective,
                                  {"noise": "NOISE", "response": "RESPONSE"},
                                  "OBJECTIVE_", objective, "objective")
        if selector is not None:
            p.selector = _lookup(calibration_pb2.ResponseSelector,
                                 {"snapkv": "SNAPKV", "h2o": "H2O", "streaming": "STREAMING"},
                                 "RESPONSE_SELECTOR_", selector, "selector")
        if verify is not None:
            spec.verify = verify
        request = calibration_pb2.SubmitJobRequest(spec=spec, idempotency_key=idempotency_key)
        response = self._call(self._calibration.SubmitJob, request, SUBMIT_TIMEOUT)
        return Job.from_proto(response.job)

    def get_job(self, job_id: str) -> Job:
        """One job. Raises InvalidArgument (empty id), NotFound."""
        return Job.from_proto(
            self._call(self._calibration.GetJob, calibration_pb2.GetJobRequest(job_id=job_id)))

    def list_jobs(self, model_hash: str = "", states: Sequence[str] = ()) -> List[Job]:
        """Every job (all pages), newest first; only `model_hash`'s and in `states` when given
        ("PENDING", "RUNNING", ...)."""
        request = calibration_pb2.ListJobsRequest(model_hash=model_hash)
        for s in states:
            request.states.append(calibration_pb2.JobState.Value("JOB_STATE_" + s))
        pages = self._all_pages(self._calibration.ListJobs, request, "jobs")
        return [Job.from_proto(j) for j in pages]

    def cancel(self, job_id: str) -> Job:
        """Cancels a job; returns it (CANCELLED). Raises NotFound, FailedPrecondition (finished)."""
        return Job.from_proto(
            self._call(self._calibration.CancelJob, calibration_pb2.CancelJobRequest(job_id=job_id)))

    def watch(self, job_id: str, timeout: Optional[float] = None) -> Iterator[JobEvent]:
        """The job's events: a JobSnapshot first, then JobStateChange, JobProgressEvent and
        JobWarning as they happen; the iterator ends after the event that makes the job terminal.

        `timeout` (seconds) bounds the whole stream (DeadlineExceeded past it); None: no limit.
        Raises NotFound, and Unavailable when the stream breaks (wait() reconnects; this does
        not). Closing the iterator cancels the stream.
        """
        stream = self._calibration.WatchJob(
            calibration_pb2.WatchJobRequest(job_id=job_id), timeout=timeout,
            metadata=self._metadata)
        try:
            for message in stream:
                event = job_event_from_proto(message)
                if event is not None:
                    yield event
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            stream.cancel()

    def wait(
        self,
        job_id: str,
        *,
        progress: bool = True,
        timeout: Optional[float] = None,
        stream: Optional[TextIO] = None,
    ) -> Job:
        """Follows the job until it is terminal and returns it (SUCCEEDED).

        With `progress`, draws a progress bar on `stream` (default stderr): redrawn in place on a
        terminal, otherwise one line per change of state and per tenth of the trials. A broken
        stream (Unavailable) is reopened with backoff (100 ms doubling to 5 s, +-20 % jitter),
        starting again from the snapshot. Raises JobFailed when the job ends FAILED or CANCELLED,
        DeadlineExceeded after `timeout` seconds (None: no limit), NotFound, and the errors of
        the calls.
        """
        out = stream if stream is not None else sys.stderr
        bar = _ProgressBar(out, job_id) if progress else None
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = 0.1
        job: Optional[Job] = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED,
                                              f"job {job_id} not finished after {timeout} s")
            try:
                for event in self.watch(job_id, timeout=left):
                    backoff = 0.1
                    if isinstance(event, JobSnapshot):
                        job = event.job
                    if bar is not None:
                        bar.update(event)
                # The stream ends after the terminal event; read the final job once.
                job = self.get_job(job_id)
                if job.done:
                    break
            except Unavailable:
                time.sleep(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, 5.0)
        if bar is not None:
            bar.finish(job)
        if job.state != "SUCCEEDED":
            if job.error is not None:
                code = getattr(grpc.StatusCode, job.error.code, grpc.StatusCode.UNKNOWN)
                message = job.error.message
            else:
                code, message = grpc.StatusCode.CANCELLED, "the job was cancelled"
            raise JobFailed(code, f"job {job_id} {job.state}: {message}", job)
        return job

    # -- profiles and budget maps ----------------------------------------------------------

    def get_profile(self, model_hash: str, version: int = 0) -> Profile:
        """A profile with its layers: `version`, or the latest (0). Raises InvalidArgument
        (malformed hash, negative version), NotFound."""
        return Profile.from_proto(self._call(
            self._calibration.GetProfile,
            calibration_pb2.GetProfileRequest(model_hash=model_hash, version=version)))

    def list_profiles(self, model_hash: str = "") -> List[Profile]:
        """Every profile version (all pages; `layers` empty), by model hash then version
        descending; only `model_hash`'s when given."""
        request = calibration_pb2.ListProfilesRequest(model_hash=model_hash)
        pages = self._all_pages(self._calibration.ListProfiles, request, "profiles")
        return [Profile.from_proto(p) for p in pages]

    def budget_map(self, model_hash: str, params: BudgetParams,
                   profile_version: int = 0) -> BudgetMap:
        """Per-layer budgets from a stored profile (the latest when `profile_version` is 0), as
        `ripplekv budgets --scheduler`. Raises InvalidArgument (bad parameters; kvpress without
        context_len), NotFound (no such profile), FailedPrecondition (the profile does not cover
        every layer, or per_head without head curves)."""
        request = calibration_pb2.GetBudgetMapRequest(
            model_hash=model_hash, profile_version=profile_version, params=params.to_proto())
        return BudgetMap.from_proto(self._call(self._calibration.GetBudgetMap, request))

    # -- frozen map versions ---------------------------------------------------------------

    def create_map_version(
        self,
        model_hash: str,
        params: BudgetParams,
        *,
        profile_version: int = 0,
        selection: str = "",
        selection_params: Optional[Dict[str, str]] = None,
    ) -> MapVersion:
        """Freezes a budget map into an immutable version, as `ripplekv map create`
        (`params.format` is ignored). Idempotent: equal inputs give the same version, with
        `existing` True. `selection` names the KV selection method the map is meant for (e.g.
        "snapkv", with {"window": "32"}). Raises InvalidArgument, NotFound, FailedPrecondition."""
        request = rollout_pb2.CreateBudgetMapRequest(
            model_hash=model_hash, profile_version=profile_version, params=params.to_proto())
        request.selection.method = selection
        request.selection.params.update(selection_params or {})
        response = self._call(self._rollout.CreateBudgetMap, request)
        return MapVersion.from_proto(response.map, existing=response.existing)

    def get_map_version(self, model_hash: str, version: str = "latest") -> MapVersion:
        """One frozen map with its tokens and document; `version` an id or "latest". Raises
        InvalidArgument, NotFound."""
        return MapVersion.from_proto(self._call(
            self._rollout.GetBudgetMap,
            rollout_pb2.GetBudgetMapVersionRequest(model_hash=model_hash, version=version)))

    def list_map_versions(self, model_hash: str) -> List[MapVersion]:
        """The model's frozen maps (all pages), newest first, without tokens and documents."""
        request = rollout_pb2.ListBudgetMapVersionsRequest(model_hash=model_hash)
        pages = self._all_pages(self._rollout.ListBudgetMaps, request, "maps")
        return [MapVersion.from_proto(m) for m in pages]

    # -- rollouts --------------------------------------------------------------------------

    def start_rollout(
        self,
        model_hash: str,
        map_version: str,
        *,
        stages: Sequence[Union[int, str]] = (),
        soak: float = 0.0,
        stage_timeout: Optional[float] = None,
        min_ack_share: Optional[float] = None,
    ) -> Rollout:
        """Starts moving `map_version` through stages of the model's serving nodes, as `ripplekv
        rollout start`. `stages`: node counts (1) or shares ("10%"), growing; empty: 1, 10%, 50%,
        100%. `soak` and `stage_timeout` in seconds (defaults 0 and 5 minutes); `min_ack_share`
        in (0, 1] (default 1). Raises InvalidArgument, NotFound (no such map version),
        FailedPrecondition (a rollout of the model is running or paused; the map is active)."""
        request = rollout_pb2.CreateRolloutRequest(model_hash=model_hash, map_version=map_version)
        request.stages.extend(_parse_stage(s) for s in stages)
        request.soak.CopyFrom(_duration(soak))
        if stage_timeout is not None:
            request.stage_timeout.CopyFrom(_duration(stage_timeout))
        if min_ack_share is not None:
            request.min_ack_share = min_ack_share
        return Rollout.from_proto(self._call(self._rollout.CreateRollout, request))

    def rollout_status(self, rollout_id: str) -> Rollout:
        """One rollout with its per-node states. Raises InvalidArgument, NotFound."""
        return Rollout.from_proto(self._call(
            self._rollout.GetRollout, rollout_pb2.GetRolloutRequest(rollout_id=rollout_id)))

    def pause_rollout(self, rollout_id: str, reason: str = "") -> Rollout:
        """Pauses a RUNNING rollout (a PAUSED one: no-op). Raises NotFound, FailedPrecondition."""
        return Rollout.from_proto(self._call(
            self._rollout.PauseRollout,
            rollout_pb2.PauseRolloutRequest(rollout_id=rollout_id, reason=reason)))

    def resume_rollout(self, rollout_id: str) -> Rollout:
        """Resumes a PAUSED rollout. Raises NotFound, FailedPrecondition (not paused)."""
        return Rollout.from_proto(self._call(
            self._rollout.ResumeRollout, rollout_pb2.ResumeRolloutRequest(rollout_id=rollout_id)))

    def rollback_rollout(self, rollout_id: str) -> Rollout:
        """Restores the previous map on every node the rollout assigned (ROLLED_BACK). Raises
        NotFound, FailedPrecondition (superseded)."""
        return Rollout.from_proto(self._call(
            self._rollout.RollbackRollout,
            rollout_pb2.RollbackRolloutRequest(rollout_id=rollout_id)))

    def list_rollouts(self, model_hash: str = "") -> List[Rollout]:
        """Every rollout (all pages), newest first, without per-node states; only
        `model_hash`'s when given."""
        request = rollout_pb2.ListRolloutsRequest(model_hash=model_hash)
        pages = self._all_pages(self._rollout.ListRollouts, request, "rollouts")
        return [Rollout.from_proto(r) for r in pages]


class _ProgressBar:
    """Client.wait()'s progress on a text stream: in place on a terminal, lines otherwise."""

    _WIDTH = 30

    def __init__(self, out: TextIO, job_id: str) -> None:
        self._out = out
        self._job_id = job_id
        self._tty = hasattr(out, "isatty") and out.isatty()
        self._state = ""
        self._decile = -1
        self._drawn = False

    def update(self, event: JobEvent) -> None:
        if isinstance(event, JobSnapshot):
            self._state = event.job.state
            self._draw(event.job.progress, changed=True)
        elif isinstance(event, JobStateChange):
            self._state = event.current
            self._draw(None, changed=True)
        elif isinstance(event, JobProgressEvent):
            self._draw(event.progress, changed=False)
        else:  # a warning: its own line
            self._line(f"job {self._job_id}: warning: {event.message}")
        self._out.flush()

    def finish(self, job: Job) -> None:
        self._state = job.state
        self._draw(job.progress, changed=True)
        if self._tty and self._drawn:
            self._out.write("\n")
        self._out.flush()

    _last: Optional[JobProgress] = None

    def _draw(self, p: Optional[JobProgress], changed: bool) -> None:
        if p is not None:
            self._last = p
        p = self._last
        fraction = p.fraction if p is not None else 0.0
        decile = int(fraction * 10)
        if not self._tty and not changed and decile == self._decile:
            return
        self._decile = decile
        filled = int(fraction * self._WIDTH)
        text = f"job {self._job_id} {self._state:<9} [{'#' * filled}{'.' * (self._WIDTH - filled)}]"
        text += f" {fraction * 100:5.1f}%"
        if p is not None:
            text += f" {p.trials_done}/{p.trials_total} trials"
            if p.eta_seconds is not None and self._state == "RUNNING":
                text += f" eta {int(p.eta_seconds) // 60}m{int(p.eta_seconds) % 60:02d}s"
            if p.waiting_reason:
                text += f" ({p.waiting_reason})"
        if self._tty:
            self._out.write("\r\x1b[2K" + text)
            self._drawn = True
        else:
            self._out.write(text + "\n")

    def _line(self, text: str) -> None:
        if self._tty and self._drawn:
            self._out.write("\r\x1b[2K")
        self._out.write(text + "\n")
