"""Real RippleKV processes on loopback for the client's tests (as tests/cli/process_harness.h).

The binaries' paths come from the environment (the ctest registration in tests/python sets
them): RIPPLEKV_SCHEDULER, RIPPLEKV_WORKER; the default model from RIPPLEKV_SMOLLM2_GGUF. Every
process is started with its output in files under a temporary directory and is stopped
(SIGTERM, then SIGKILL after 10 s) by stop(), which tests register as a cleanup.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import ripplekv

SOURCE_DIR = Path(__file__).resolve().parents[2]


def binary(name: str) -> str:
    """The path in environment variable `name`; skips the test when it is unset."""
    path = os.environ.get(name, "")
    if not path:
        raise unittest.SkipTest(f"{name} is not set (the ctest registration sets it)")
    return path


def model_path() -> str:
    """The default model; skips the test when RIPPLEKV_SMOLLM2_GGUF is unset."""
    path = os.environ.get("RIPPLEKV_SMOLLM2_GGUF", "")
    if not path:
        raise unittest.SkipTest(
            "RIPPLEKV_SMOLLM2_GGUF is not set: the tests that need a stored profile run a real "
            "worker on the default model (scripts/fetch-model; scripts/test sets it)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(done: Callable[[], bool], timeout: float, what: str, period: float = 0.1) -> None:
    """Polls `done` until it holds; fails with AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(period)


class Processes:
    """Child processes logging to DIR/NAME.{out,err}; stop() ends them all."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._procs: List[subprocess.Popen] = []

    def start(self, name: str, argv: List[str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.out", "wb") as out, open(self.dir / f"{name}.err", "wb") as err:
            p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self._procs.append(p)
        return p

    def log(self, name: str) -> str:
        text = ""
        for suffix in ("out", "err"):
            path = self.dir / f"{name}.{suffix}"
            if path.exists():
                text += path.read_text(errors="replace")
        return text

    def stop(self) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self._procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self._procs.clear()


class Cluster:
    """A scheduler (and optionally workers) on a free loopback port, with a temporary database.

    Plaintext (--insecure) unless `tls` flags are given; `extra` flags follow.
    """

    def __init__(self, extra: Optional[List[str]] = None, insecure: bool = True) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="ripplekv_python_test_")
        self.dir = Path(self._tmp.name)
        self.procs = Processes(self.dir)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        argv = [binary("RIPPLEKV_SCHEDULER"), "--listen", self.address,
                "--db", str(self.dir / "db"), "--verify-wait-ms", "1000"]
        if insecure:
            argv.append("--insecure")
        self.scheduler = self.procs.start("scheduler", argv + (extra or []))

    def await_serving(self, client: ripplekv.Client, timeout: float = 30.0) -> None:
        """Waits until `client` gets an answer (any but Unavailable) from the scheduler."""

        def answers() -> bool:
            if self.scheduler.poll() is not None:
                raise AssertionError("the scheduler exited: " + self.procs.log("scheduler"))
            try:
                client.list_jobs()
            except ripplekv.Unavailable:
                return False
            except ripplekv.RippleKVError:
                return True
            return True

        wait_for(answers, timeout, "the scheduler to answer")

    def start_worker(self, worker_id: str, model: str) -> None:
        """Starts a worker of `model` and waits (60 s) until it has registered."""
        self.procs.start(worker_id, [binary("RIPPLEKV_WORKER"), "--scheduler", self.address,
                                     "--model", model, "--threads", "1", "--id", worker_id])
        wait_for(lambda: "registered with" in self.procs.log(worker_id), 60.0,
                 f"worker {worker_id} to register:\n{self.procs.log(worker_id)}")

    def close(self) -> None:
        self.procs.stop()
        self._tmp.cleanup()


def serving_cluster() -> Tuple[Cluster, ripplekv.Client]:
    """A plaintext Cluster and a Client of it, once the scheduler answers; both closed again
    when it does not."""
    cluster = Cluster()
    client = ripplekv.Client(cluster.address)
    try:
        cluster.await_serving(client)
    except BaseException:
        client.close()
        cluster.close()
        raise
    return cluster, client
