"""deploy/slurm's scripts, submitted to a real Slurm cluster (tests/slurm/slurm-cluster).

The scripts run unmodified, configured only through their documented variables and sbatch
options: cluster-hetjob.sbatch (the scheduler as component 0, a TP=2 worker launched by
`srun --mpi=pmix` as component 1) and workers.sbatch (a TP=1 worker against that scheduler), all
workers on CPUs (RIPPLEKV_DEVICE=cpu). The checks, in order, on one cluster:

1. a calibration through both workers equals local `ripplekv calibrate` within the tensor-parallel
   tolerance, and both workers did tasks;
2. `scancel` of the TP=1 worker's job mid-calibration: the job completes through the other
   worker, with every trial stored once;
3. a worker job reaching its time limit drains (the script's SIGTERM warning, the worker finishes
   its task) and ends COMPLETED, not TIMEOUT;
4. `scancel` of the whole heterogeneous job: every process it started ends, and a new submission
   of the same script on the same database serves the jobs and profiles stored before.

Environment: SLURM_CLUSTER_DIR (a running slurm-cluster), RIPPLEKV_CLI, RIPPLEKV_SCHEDULER,
RIPPLEKV_WORKER (binaries), RIPPLEKV_SMOLLM2_GGUF (the model); tests/slurm/slurm_test.sh sets
them up.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Dict, List, Optional

import ripplekv

SOURCE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "python" / "tests"))
from harness import wait_for  # noqa: E402  (the client tests' polling helper)

SLURM_DIR = SOURCE / "deploy" / "slurm"
CLUSTER = Path(os.environ.get("SLURM_CLUSTER_DIR", ""))
MODEL = os.environ.get("RIPPLEKV_SMOLLM2_GGUF", "")
HOST = os.uname().nodename.split(".")[0]

# Small calibrations: 30 layers x 2 trials x SAMPLES samples.
SMALL = {"samples": 2, "context_len": 64, "probe_len": 8}
LONG = {"samples": 6, "context_len": 384, "probe_len": 32}


class Site:
    """What the scripts need: binaries in one directory, TLS material and tokens, a database and
    a submit directory, under a temporary directory; and the Slurm client environment."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="ripplekv-slurm-")
        self.dir = Path(self.tmp.name)
        self.bin = self.dir / "bin"
        self.bin.mkdir()
        for name in ("RIPPLEKV_CLI", "RIPPLEKV_SCHEDULER", "RIPPLEKV_WORKER"):
            path = Path(os.environ[name])
            (self.bin / path.name).symlink_to(path)
        made = self.dir / "made"
        subprocess.run([str(SOURCE / "deploy" / "local" / "make-tls"), str(made)], check=True,
                       capture_output=True)
        self.tls = self.dir / "tls"
        self.tokens = self.dir / "tokens"
        self.tls.mkdir()
        self.tokens.mkdir()
        for src, dst in (("server.pem", "tls/tls.crt"), ("server.key", "tls/tls.key"),
                         ("ca.pem", "tls/ca.crt"), ("tokens", "tokens/tokens"),
                         ("token-worker", "tokens/worker")):
            shutil.copy(made / src, self.dir / dst)
        self.submitter = made / "token-submitter"
        self.db = self.dir / "db"
        self.port = free_ports(3)  # the scheduler's; health and metrics the next two
        self.env = {**os.environ, "SLURM_CONF": str(CLUSTER / "slurm.conf")}

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"  # the certificate names localhost

    def client(self) -> ripplekv.Client:
        return ripplekv.Client(self.address, tls_ca=str(self.tls / "ca.crt"),
                               token_file=str(self.submitter), timeout=20)

    def slurm(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                              timeout=60, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def sbatch(self, options: List[str], script: str, env: Dict[str, str]) -> str:
        """The job id of `sbatch OPTIONS SCRIPT` run in the submit directory with `env`."""
        done = subprocess.run(["sbatch", "--parsable", f"--chdir={self.dir}", *options,
                               str(SLURM_DIR / script)], env={**self.env, **env},
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise AssertionError(f"sbatch {script} failed: {done.stderr}")
        return done.stdout.strip().split(";")[0]

    def start_cluster(self) -> str:
        """cluster-hetjob.sbatch: the scheduler on HOST, a TP=2 worker on gpu1."""
        return self.sbatch(
            ["--cpus-per-task=1", "--mem=512M", ":", "--nodes=1", "--ntasks-per-node=2",
             "--gpus-per-node=2", "--cpus-per-task=1", "--mem=4G"],
            "cluster-hetjob.sbatch",
            {"RIPPLEKV_DB": str(self.db), "RIPPLEKV_MODEL": MODEL,
             "RIPPLEKV_TLS_DIR": str(self.tls), "RIPPLEKV_TOKEN_DIR": str(self.tokens),
             "RIPPLEKV_TLS_SERVER_NAME": "localhost", "RIPPLEKV_BIN_DIR": str(self.bin),
             "RIPPLEKV_DEVICE": "cpu", "TP": "2", "RIPPLEKV_PORT": str(self.port),
             "RIPPLEKV_HEALTH_PORT": str(self.port + 1),
             "RIPPLEKV_SCHEDULER_METRICS_PORT": str(self.port + 2),
             "RIPPLEKV_METRICS_PORT": "none", "RIPPLEKV_START_TIMEOUT": "60"})

    def start_worker(self, extra: Optional[List[str]] = None) -> str:
        """workers.sbatch: a TP=1 worker on gpu2 against the cluster's scheduler."""
        return self.sbatch(
            ["--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=1", "--cpus-per-task=1",
             *(extra or [])],
            "workers.sbatch",
            {"RIPPLEKV_SCHEDULER": f"{HOST}:{self.port}", "RIPPLEKV_MODEL": MODEL,
             "RIPPLEKV_TLS_CA": str(self.tls / "ca.crt"),
             "RIPPLEKV_TLS_SERVER_NAME": "localhost",
             "RIPPLEKV_TOKEN_FILE": str(self.tokens / "worker"),
             "RIPPLEKV_WORKER": str(self.bin / "ripplekv-worker"), "RIPPLEKV_DEVICE": "cpu",
             "RIPPLEKV_METRICS_PORT": "none", "TP": "1"})

    def job_state(self, job: str) -> str:
        out = self.slurm("scontrol", "show", "job", job, "-o", check=False)
        for field in out.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return "GONE"

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [os.environ["RIPPLEKV_CLI"], *args, "--scheduler", self.address, "--tls-ca",
             str(self.tls / "ca.crt"), "--token-file", str(self.submitter)],
            capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise AssertionError(f"ripplekv {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def workers(self) -> Dict[str, dict]:
        """Connected workers by id (`ripplekv workers --json`)."""
        listed = json.loads(self.cli("workers", "--json"))
        rows = listed.get("workers", [])  # omitted when there are none
        return {w["worker_id"]: w for w in rows if w.get("connected", True)}

    def output(self, job: str, name: str) -> str:
        path = self.dir / f"ripplekv-{name}-{job}.out"
        return path.read_text(errors="replace") if path.exists() else ""


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on every address now."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("", port))
        except OSError:
            continue
        return first
    raise AssertionError(f"no {count} consecutive free ports")


def processes_of(job: str) -> List[int]:
    """Pids of the processes Slurm started for `job` (SLURM_JOB_ID in their environment)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}".encode() in environ:
            pids.append(int(entry.name))
    return pids


def local_profile(options: Dict[str, int]) -> List[float]:
    """Per-layer mean KL of local `ripplekv calibrate` with the same parameters."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.json"
        subprocess.run([os.environ["RIPPLEKV_CLI"], "calibrate", "--model", MODEL, "--samples",
                        str(options["samples"]), "--context-len", str(options["context_len"]),
                        "--probe", str(options["probe_len"]), "--threads", "1", "--out",
                        str(out)], check=True, capture_output=True, timeout=600)
        return [layer["mean_kl"] for layer in json.loads(out.read_text())["layers"]]


class SlurmTest(unittest.TestCase):
    site: Site
    submitted: float
    cluster_job: str
    worker_job: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.site = Site()
        cls.submitted = time.monotonic()
        cls.cluster_job = cls.site.start_cluster()
        cls.worker_job = cls.site.start_worker()

    @classmethod
    def tearDownClass(cls) -> None:
        for job in (cls.worker_job, cls.cluster_job):
            cls.site.slurm("scancel", job, check=False)
        cls.site.tmp.cleanup()

    def wait_workers(self, count: int, timeout: float = 120) -> None:
        def ready() -> bool:
            try:
                return len(self.site.workers()) >= count
            except AssertionError:  # the scheduler is not serving yet
                return False
        try:
            wait_for(ready, timeout, f"{count} workers registered", period=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}") from None

    def logs(self) -> str:
        """The tails of the jobs' outputs and squeue, for a failure's message."""
        parts = [self.site.slurm("squeue", check=False)]
        for job, name in ((self.cluster_job, "cluster"), (self.worker_job, "workers")):
            lines = self.site.output(job, name).splitlines()[-15:]
            parts.append(f"--- job {job} ({name}):\n" + "\n".join(lines))
        return "\n".join(parts)

    def counts(self, job: ripplekv.Job) -> List[int]:
        with self.site.client() as c:
            return [layer.count for layer in c.get_profile(job.model_hash,
                                                           job.profile_version).layers]

    def test_1_calibration_through_both_workers_equals_local(self) -> None:
        self.wait_workers(2)
        print(f"\nslurm: sbatch to both workers registered: "
              f"{time.monotonic() - self.submitted:.1f} s", file=sys.stderr)
        ids = set(self.site.workers())
        self.assertEqual(ids, {f"{HOST}-cpu-0", f"{HOST}-0"})  # the TP=2 group, the TP=1 worker
        with self.site.client() as c:
            start = time.monotonic()
            job = c.wait(c.submit(model_path=MODEL, **SMALL).job_id, progress=False,
                         timeout=300)
            print(f"slurm: calibration of {SMALL}: {time.monotonic() - start:.1f} s",
                  file=sys.stderr)
            self.assertEqual(job.state, "SUCCEEDED")
            profile = c.get_profile(job.model_hash, job.profile_version)
        done = {w: int(row.get("tasks_completed", 0)) for w, row in self.site.workers().items()}
        self.assertTrue(all(n > 0 for n in done.values()), done)
        local = local_profile(SMALL)
        for layer, expected in zip(profile.layers, local):
            self.assertAlmostEqual(layer.mean_kl, expected, delta=2e-3 * abs(expected) + 1e-9,
                                   msg=f"layer {layer.layer}")
            self.assertEqual(layer.count, SMALL["samples"] * 2)

    def test_2_scancel_of_one_worker_mid_job(self) -> None:
        self.wait_workers(2)
        with self.site.client() as c:
            job = c.submit(model_path=MODEL, **LONG)
            wait_for(lambda: c.get_job(job.job_id).progress.tasks_done > 0, 120,
                     "the first task done")
            self.site.slurm("scancel", self.worker_job)
            wait_for(lambda: self.site.job_state(self.worker_job) not in ("RUNNING",
                                                                           "COMPLETING"),
                     60, "the worker job to end")
            finished = c.wait(job.job_id, progress=False, timeout=600)
        self.assertEqual(finished.state, "SUCCEEDED")
        self.assertEqual(self.counts(finished), [LONG["samples"] * 2] * 30)  # each trial once

    def test_3_a_time_limit_drains_the_worker(self) -> None:
        # One minute, the warning 40 s before it: the script's trap drains the worker.
        type(self).worker_job = self.site.start_worker(["--time=1", "--signal=B:TERM@40"])
        self.wait_workers(2)
        with self.site.client() as c:
            job = c.submit(model_path=MODEL, **LONG)
            wait_for(lambda: self.site.job_state(self.worker_job) not in ("RUNNING",
                                                                           "COMPLETING",
                                                                           "PENDING"),
                     150, "the time-limited worker job to end")
            finished = c.wait(job.job_id, progress=False, timeout=600)
        self.assertEqual(self.site.job_state(self.worker_job), "COMPLETED")
        out = self.site.output(self.worker_job, "workers")
        self.assertIn("stopping: the workers drain", out)
        self.assertIn("srun exited with status 0", out)
        self.assertEqual(finished.state, "SUCCEEDED")
        self.assertEqual(self.counts(finished), [LONG["samples"] * 2] * 30)

    def test_4_scancel_of_the_allocation_ends_everything_and_keeps_the_database(self) -> None:
        self.wait_workers(1)
        with self.site.client() as c:
            before = {j.job_id: j.state for j in c.list_jobs()}
            profiles = c.list_profiles()
        self.assertTrue(before)
        started = processes_of(self.cluster_job)
        self.assertTrue(started, "no process carries the heterogeneous job's id")
        self.site.slurm("scancel", self.cluster_job)
        wait_for(lambda: self.site.job_state(self.cluster_job) not in ("RUNNING", "COMPLETING"),
                 60, "the heterogeneous job to end")
        wait_for(lambda: not [p for p in started if Path(f"/proc/{p}").exists()], 30,
                 "every process of the job to end")
        self.assertEqual(processes_of(self.cluster_job), [])
        # The same script on the same database: the jobs and profiles are there.
        type(self).cluster_job = self.site.start_cluster()
        self.wait_workers(1)
        with self.site.client() as c:
            after = {j.job_id: j.state for j in c.list_jobs()}
            self.assertEqual({k: v for k, v in after.items() if k in before}, before)
            self.assertEqual(len(c.list_profiles()), len(profiles))


if __name__ == "__main__":
    unittest.main()
