#!/usr/bin/env python3
"""Faulty workers: what one faulty worker costs a job, and what verification costs.

Usage:
  bench/faulty_workers.py --model PATH [--build build] [--repeat 3]
      [--scenarios none,nan,hung,hoarder,wrong,verify-0,verify-0.05,verify-1] [--timeout 120]
      [--json]

Every run starts a fresh ripplekv-scheduler (plaintext --insecure, fresh RocksDB, Prometheus
metrics on a free port) and submits one 60-task job: `ripplekv submit --samples 2 --context-len 64
--probe 8 --trials 1 --seed 5 --wait` (2 samples x SmolLM2's 30 layers, one trial each; the model
hash is computed once and passed with --model-hash). The wall time is from the submit command's
start to its exit with the job SUCCEEDED (a failed or timed-out job is reported as such). Genuine
workers are `ripplekv-worker --threads 1` with OMP_NUM_THREADS=1, started during the job: right
after the faulty worker was handed its first task(s), or with no faulty worker as soon as the job
is submitted, so each row pays the same worker start-up.

Scheduler flags of every run: --lease-ms 2000 --heartbeat-timeout-ms 2400 --task-deadline-ms 4000
--verify-wait-ms 1000. The defaults (120 s leases, a task deadline derived from the job, a 60 s
verify wait) would make the faulty rows measure the defaults rather than the mechanism: a hung
worker is quarantined after 3 failed attempts (--quarantine-failures), each an expired lease, and
the job cannot end while it holds a task, so with 120 s leases it costs up to 3 lease times
(6 minutes) before quarantine; a hoarder holds the whole job until the task deadline.

Faulty scenarios, each with one faulty worker speaking worker.proto from this script (gRPC stubs
generated at run time from proto/ripplekv/v1 with grpcio-tools, installed by scripts/python-grpc),
which registers (the model's true summary) and connects BEFORE the job is submitted, so the
scheduler serves it first:
  none     no faulty worker, 1 genuine worker (the baseline of nan, hung and hoarder);
  nan      answers every assignment at once with a task_done whose KLs are NaN; 1 genuine;
  hung     accepts tasks and heartbeats without listing them: each lease expires; 1 genuine;
  hoarder  capacity 64: takes the whole job and heartbeats listing every task, never answering,
           so all its leases expire at the task deadline; the genuine worker starts once it holds
           all it was given; 1 genuine;
  wrong    answers with plausible wrong KLs (10 x 0.01 = 0.1 nats for every trial) at
           `submit --verify 1`, beside 2 genuine workers (a disagreement needs a third worker to
           decide); it reports other numerics than the genuine workers, so results are compared
           within the tolerance. It answers its first task at once, then holds (and lists) the
           tasks it gets until both genuine workers registered, as the integration test does:
           otherwise it races their start, as every task it answers alone completes unverified
           once the 1 s verify wait passes. Compare it with verify-1.
Jobs of none/nan/hung/hoarder use the scheduler's default verify fraction (0.05): with one genuine
worker, the tasks it selects wait the 1 s verify wait for a second worker, then complete
unverified (the unverified column), which can add up to that second to the job.
Verification cost: 2 genuine workers, no faulty one, `submit --verify F` for F = 0, 0.05, 1
(verify-F); the verify sample is random per scheduler, so the 0.05 counts vary between runs.

Reported per scenario over --repeat runs: the wall time (median [min, max]); for faulty rows the
time from submit until the faulty worker received its `quarantined` message, and the tasks it was
handed; from the scheduler's metrics at the job's end: task leases (every run of a task,
ripplekv_scheduler_tasks_leased_total), tasks verified and unverified, and tasks recomputed.
"""

import argparse
import json
import os
import queue
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scheduler_overhead import ROOT, find_bin, free_port  # noqa: E402

JOB = ["--samples", "2", "--context-len", "64", "--probe", "8", "--trials", "1", "--seed", "5"]
TASKS = 2 * 30
SCHEDULER_FLAGS = ["--lease-ms", "2000", "--heartbeat-timeout-ms", "2400",
                   "--task-deadline-ms", "4000", "--verify-wait-ms", "1000"]
# scenario: (faulty kind or None, genuine workers, submit --verify or None for the default)
SCENARIOS = {
    "none": (None, 1, None),
    "nan": ("nan", 1, None),
    "hung": ("hung", 1, None),
    "hoarder": ("hoarder", 1, None),
    "wrong": ("wrong", 2, "1"),
    "verify-0": (None, 2, "0"),
    "verify-0.05": (None, 2, "0.05"),
    "verify-1": (None, 2, "1"),
}
METRICS = {
    "leases": "ripplekv_scheduler_tasks_leased_total",
    "completed": "ripplekv_scheduler_tasks_completed_total",
    "retried": "ripplekv_scheduler_tasks_retried_total",
    "lease_expiries": "ripplekv_scheduler_lease_expiries_total",
    "quarantines": "ripplekv_scheduler_quarantines_total",
    "verified": "ripplekv_scheduler_tasks_verified_total",
    "unverified": "ripplekv_scheduler_tasks_unverified_total",
    "disagreements": "ripplekv_scheduler_verification_disagreements_total",
    "recomputed": "ripplekv_scheduler_tasks_recomputed_total",
}

PROCS = []  # every process started, killed at exit


def kill_all():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_for(pred, timeout, step=0.05):
    """True once pred() holds, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def load_grpc(tmp):
    """Imports grpc and stubs of proto/ripplekv/v1 generated into `tmp`; returns (grpc, worker_pb2,
    worker_pb2_grpc, calibration_pb2)."""
    site = subprocess.run([str(ROOT / "scripts/python-grpc")], capture_output=True, text=True,
                          check=True).stdout.strip()
    sys.path.insert(0, site)
    out = tmp / "stubs"
    out.mkdir()
    protos = sorted(str(p) for p in (ROOT / "proto/ripplekv/v1").glob("*.proto"))
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"),
                        f"--python_out={out}", f"--grpc_python_out={out}", *protos],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=site))
    if r.returncode != 0:
        sys.exit(f"protoc failed: {r.stderr}")
    sys.path.insert(0, str(out))
    import grpc
    from ripplekv.v1 import calibration_pb2, worker_pb2, worker_pb2_grpc
    return grpc, worker_pb2, worker_pb2_grpc, calibration_pb2


class FaultyWorker:
    """A worker speaking worker.proto (as tests/cli/fake_worker.h): Register, then one Connect
    stream, read on a thread of its own. Accepts every assignment and answers it with
    answer(task): a list of messages, or None to keep the task (asked again at each heartbeat).
    Heartbeats every 50 ms from another thread (so reading never waits), listing the kept tasks
    when `list_held`."""

    def __init__(self, rpc, addr, worker_id, model, answer, list_held, capacity=1, numerics=""):
        self.grpc, self.pb, pb_grpc, _ = rpc
        self.id = worker_id
        self.answer, self.list_held = answer, list_held
        self.channel = self.grpc.insecure_channel(addr)
        self.stub = pb_grpc.WorkerServiceStub(self.channel)
        self.session = self.stub.Register(self.pb.RegisterRequest(
            worker_id=worker_id, model=model, capacity=capacity, host="bench",
            version="bench/faulty_workers.py", numerics=numerics,
            instance=secrets.token_hex(8)), timeout=10).session_id
        self.outbox = queue.Queue()
        self.lock = threading.Lock()  # guards kept, assigned, sequence and answer's state
        self.sequence = 0
        self.kept = {}  # task id -> assignment
        self.assigned = 0
        self.quarantined_at = None  # time.perf_counter() of the quarantined message
        self.quarantine_reason = ""
        self.end_code = None
        self.connected = threading.Event()  # the first heartbeat ack came
        self.ended = threading.Event()

    def _requests(self):
        while True:
            m = self.outbox.get()
            if m is None:
                return
            yield m

    def _beat(self):
        """Sends a heartbeat, after answering the kept tasks answer() lets go now. Under lock."""
        self.kept = {k: t for k, t in self.kept.items() if not self._handle(t)}
        held = list(self.kept) if self.list_held else []
        self.sequence += 1
        self.outbox.put(self.pb.WorkerMessage(heartbeat=self.pb.Heartbeat(
            sequence=self.sequence, active_tasks=len(held), task_ids=held)))

    def _handle(self, task):
        """Answers `task` (True) or keeps it (False). Under lock."""
        messages = self.answer(task)
        if messages is None:
            return False
        for m in messages:
            self.outbox.put(m)
        return True

    def start(self, lifetime=300):
        self.outbox.put(self.pb.WorkerMessage(hello=self.pb.Hello(worker_id=self.id,
                                                                  session_id=self.session)))
        with self.lock:
            self._beat()
        self.call = self.stub.Connect(self._requests(), timeout=lifetime)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._heartbeats, daemon=True).start()

    def _heartbeats(self):
        while not self.ended.wait(0.05):
            with self.lock:
                self._beat()

    def _read(self):
        try:
            for m in self.call:
                kind = m.WhichOneof("kind")
                if kind == "quarantined":
                    self.quarantined_at = time.perf_counter()
                    self.quarantine_reason = m.quarantined.reason
                elif kind == "heartbeat_ack":
                    self.connected.set()
                elif kind == "task_assignment":
                    task = m.task_assignment
                    with self.lock:
                        self.assigned += 1
                        self.outbox.put(self.pb.WorkerMessage(
                            task_accepted=self.pb.TaskAccepted(task_id=task.task_id)))
                        if not self._handle(task):
                            self.kept[task.task_id] = task
                elif kind == "task_cancellation":
                    c = m.task_cancellation
                    with self.lock:
                        if c.WhichOneof("target") == "task_id":
                            self.kept.pop(c.task_id, None)
                        else:
                            self.kept = {k: t for k, t in self.kept.items()
                                         if t.job_id != c.job_id}
            self.end_code = "OK"
        except self.grpc.RpcError as e:
            self.end_code = e.code().name
        finally:
            self.ended.set()
            self.outbox.put(None)

    def stop(self):
        if hasattr(self, "call"):
            self.call.cancel()
            self.ended.wait(5)
        self.outbox.put(None)
        self.channel.close()


def task_done(pb, task, kl):
    results = [pb.TrialResult(task_id=task.task_id, job_id=task.job_id, sample=task.sample,
                              layer=task.layer, trial=t, kl=kl)
               for t in range(task.params.trials)]
    return pb.WorkerMessage(task_done=pb.TaskDone(task_id=task.task_id, job_id=task.job_id,
                                                  sample=task.sample, layer=task.layer,
                                                  results=results))


class Run:
    """One scheduler, at most one faulty worker and the genuine workers of one scenario's run."""

    def __init__(self, build, model, model_hash, model_info, rpc, tmp):
        self.build, self.model, self.model_hash = build, model, model_hash
        self.model_info, self.rpc, self.tmp = model_info, rpc, tmp
        self.cli = find_bin(build, "ripplekv", "cli")
        self.addr = f"127.0.0.1:{free_port()}"
        self.procs, self.genuine_logs, self.faulty = [], [], None

    def start_scheduler(self):
        log = self._spawn([find_bin(self.build, "ripplekv-scheduler", "scheduler/service"),
                           "--listen", self.addr, "--db", self.tmp / "db", "--insecure",
                           "--metrics-listen", "127.0.0.1:0", *SCHEDULER_FLAGS], "scheduler")
        port = re.compile(r"metrics on \S+ \(port (\d+)\)")
        if not wait_for(lambda: port.search(log.read_text()), 30):
            raise RuntimeError(f"scheduler not up:\n{log.read_text()}")
        self.metrics_port = int(port.search(log.read_text()).group(1))
        grpc = self.rpc[0]
        with grpc.insecure_channel(self.addr) as ch:
            grpc.channel_ready_future(ch).result(timeout=30)

    def _spawn(self, args, name, env=None):
        log = self.tmp / f"{name}.log"
        with open(log, "w") as f:
            p = subprocess.Popen([str(a) for a in args], stdout=f, stderr=subprocess.STDOUT,
                                 env=env)
        self.procs.append(p)
        PROCS.append(p)
        return log

    def start_faulty(self, kind, release):
        """Registers and connects the faulty worker of `kind`; `release` (an Event) lets the wrong
        worker answer the tasks it holds."""
        pb = self.rpc[1]
        answered = [0]

        def nan(task):
            return [task_done(pb, task, float("nan"))]

        def keep(task):
            return None

        def wrong(task):
            if answered[0] >= 1 and not release.is_set():
                return None
            answered[0] += 1
            return [task_done(pb, task, 10 * 0.01)]

        answer, list_held, capacity, numerics = {
            "nan": (nan, False, 1, ""),
            "hung": (keep, False, 1, ""),
            "hoarder": (keep, True, 64, ""),
            "wrong": (wrong, True, 1, "cpu-fp32/bench faulty worker"),
        }[kind]
        self.faulty = FaultyWorker(self.rpc, self.addr, f"faulty-{kind}", self.model_info, answer,
                                   list_held, capacity, numerics)
        self.faulty.start()
        if not self.faulty.connected.wait(10):
            raise RuntimeError("the faulty worker's stream got no heartbeat ack")

    def submit(self, verify):
        args = [self.cli, "submit", "--scheduler", self.addr, "--model", self.model,
                "--model-hash", self.model_hash, *JOB, "--wait"]
        if verify is not None:
            args += ["--verify", verify]
        self.submit_log = self._spawn(args, "submit")
        return self.procs[-1]

    def start_genuine(self, n):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        worker = find_bin(self.build, "ripplekv-worker", "worker/service")
        for i in range(n):
            self.genuine_logs.append(self._spawn(
                [worker, "--scheduler", self.addr, "--model", self.model, "--threads", "1",
                 "--id", f"genuine-{i}"], f"genuine-{i}", env))

    def genuine_registered(self):
        return all("registered with" in log.read_text() for log in self.genuine_logs)

    def metrics(self):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=10).read().decode()
        out = {}
        for key, name in METRICS.items():
            values = re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
            out[key] = int(sum(float(v) for v in values))
        return out

    def stop(self):
        if self.faulty:
            self.faulty.stop()
        # Submit and workers first, then the scheduler.
        for p in self.procs[1:] + self.procs[:1]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def run_once(args, scenario, model_hash, model_info, rpc):
    kind, genuine, verify = SCENARIOS[scenario]
    row = {"scenario": scenario, "ok": False}
    with tempfile.TemporaryDirectory() as d:
        run = None
        release = threading.Event()
        try:
            run = Run(Path(args.build), args.model, model_hash, model_info, rpc, Path(d))
            run.start_scheduler()
            if kind:
                run.start_faulty(kind, release)
            t0 = time.perf_counter()
            submit = run.submit(verify)
            f = run.faulty
            if kind == "hoarder":  # all it was given: the whole job, or no more for 0.5 s
                last = [0, time.monotonic()]

                def settled():
                    if f.assigned != last[0]:
                        last[:] = [f.assigned, time.monotonic()]
                    return f.assigned >= TASKS or (f.assigned > 0 and
                                                   time.monotonic() - last[1] > 0.5)
                started = wait_for(settled, 20)
            elif kind:
                started = wait_for(lambda: f.assigned >= 1, 20)
            else:
                started = wait_for(lambda: "submitted job" in run.submit_log.read_text(), 20)
            if not started:
                row["error"] = "the job never started"
                return row
            row["faulty_assigned_before_genuine"] = f.assigned if f else 0
            run.start_genuine(genuine)
            done = []  # when submit exited, timed by a thread blocked in waitpid
            threading.Thread(target=lambda: (submit.wait(), done.append(time.perf_counter())),
                             daemon=True).start()
            t_reg = None
            deadline = time.monotonic() + args.timeout
            while not done and time.monotonic() < deadline:
                if t_reg is None and run.genuine_registered():
                    t_reg = time.perf_counter() - t0
                    release.set()
                time.sleep(0.02)
            if not done:
                row["error"] = f"timed out after {args.timeout} s"
                return row
            wall = done[0] - t0
            row.update(ok=submit.returncode == 0, wall_s=round(wall, 3),
                       genuine_registered_s=round(t_reg, 3) if t_reg is not None else None,
                       **run.metrics())
            if submit.returncode != 0:
                row["error"] = run.submit_log.read_text()[-500:]
            if f:
                f.ended.wait(3)  # its quarantine, if due, ends its stream
                row.update(faulty_assigned=f.assigned, faulty_end=f.end_code,
                           quarantined_s=(round(f.quarantined_at - t0, 3)
                                          if f.quarantined_at is not None else None),
                           quarantine_reason=f.quarantine_reason)
            return row
        except Exception as e:  # a broken run is reported, the others still run
            row["error"] = f"{type(e).__name__}: {e}"
            return row
        finally:
            if run:
                run.stop()


def spread(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def summarize(scenario, runs):
    kind, genuine, verify = SCENARIOS[scenario]
    ok = [r for r in runs if r["ok"]]
    s = {"scenario": scenario, "faulty": kind or "-", "genuine": genuine,
         "verify": verify or "default", "runs": len(runs), "succeeded": len(ok),
         "wall_s": spread([r["wall_s"] for r in ok]),
         "genuine_registered_s": spread([r["genuine_registered_s"] for r in ok])}
    if kind:
        s["quarantined_s"] = spread([r.get("quarantined_s") for r in ok])
        s["quarantined_runs"] = sum(r.get("quarantined_s") is not None for r in ok)
        s["faulty_assigned"] = spread([r.get("faulty_assigned") for r in ok], 0)
    for key in METRICS:
        s[key] = spread([r[key] for r in ok], 0)
    return s


def fmt(sp, digits=2, width=20):
    if sp is None:
        return "-".ljust(width)
    if sp["min"] == sp["max"]:
        return f"{sp['median']:.{digits}f}".ljust(width)
    lo, hi = f"{sp['min']:.{digits}f}", f"{sp['max']:.{digits}f}"
    return f"{sp['median']:.{digits}f} [{lo}, {hi}]".ljust(width)


def print_table(summary, runs, repeat):
    print(f"{TASKS}-task job ({' '.join(JOB)}), scheduler {' '.join(SCHEDULER_FLAGS)}; "
          f"median [min, max] of {repeat} runs; times in s from submit")
    print(f"{'scenario':12s} {'genuine':>7s} {'verify':>7s}  {'ok':>3s}  {'wall s':20s} "
          f"{'quarantined at s':20s} {'faulty tasks':14s} {'leases':14s} {'verified':10s} "
          f"{'unverified':10s} {'recomputed':10s}")
    for s in summary:
        print(f"{s['scenario']:12s} {s['genuine']:7d} {s['verify']:>7s}  "
              f"{s['succeeded']}/{s['runs']}  {fmt(s['wall_s'])} "
              f"{fmt(s.get('quarantined_s'))} {fmt(s.get('faulty_assigned'), 0, 14)} "
              f"{fmt(s['leases'], 0, 14)} {fmt(s['verified'], 0, 10)} "
              f"{fmt(s['unverified'], 0, 10)} {fmt(s['recomputed'], 0, 10)}")
    for s in runs:
        for r in runs[s]:
            if not r["ok"]:
                print(f"{s} run {r['repeat']}: FAILED: {r.get('error')}")
            elif SCENARIOS[s][0] and r.get("quarantined_s") is None:
                print(f"{s} run {r['repeat']}: the faulty worker was not quarantined "
                      f"({r['faulty_assigned']} tasks; stream {r['faulty_end']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="SmolLM2 GGUF (scripts/fetch-model)")
    ap.add_argument("--build", default=os.environ.get("RIPPLEKV_BUILD_DIR", "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--timeout", type=float, default=120, help="seconds one job may take")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    scenarios = args.scenarios.split(",")
    for s in scenarios:
        if s not in SCENARIOS:
            sys.exit(f"unknown scenario {s}; known: {', '.join(SCENARIOS)}")
    # SIGTERM ends the bench as Ctrl-C does: every process it started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cli = find_bin(Path(args.build), "ripplekv", "cli")
    info = json.loads(subprocess.run([str(cli), "info", "--json", "--hash", args.model],
                                     capture_output=True, text=True, check=True).stdout)
    with tempfile.TemporaryDirectory() as d:
        try:
            rpc = load_grpc(Path(d))
            model_info = rpc[3].ModelInfo(
                model_hash=info["sha256"], architecture=info["architecture"],
                name=info.get("name", ""), n_layers=info["layers"], n_kv_heads=info["kv_heads"],
                head_dim=info["head_dim"], d_model=info["d_model"], vocab_size=info["vocab_size"])
            runs = {s: [] for s in scenarios}
            for i in range(args.repeat):  # interleaved, so drift hits every scenario alike
                for s in scenarios:
                    r = run_once(args, s, info["sha256"], model_info, rpc)
                    r["repeat"] = i
                    runs[s].append(r)
                    print(f"[{i + 1}/{args.repeat}] {s}: "
                          + (f"{r['wall_s']:.2f} s" if r["ok"] else f"FAILED {r.get('error')}"),
                          file=sys.stderr, flush=True)
        finally:
            kill_all()
    summary = [summarize(s, runs[s]) for s in scenarios]
    if args.json:
        print(json.dumps({"scheduler_flags": SCHEDULER_FLAGS, "job": JOB, "tasks": TASKS,
                          "repeat": args.repeat,
                          "summary": summary, "runs": runs}, indent=2))
        return
    print_table(summary, runs, args.repeat)


if __name__ == "__main__":
    main()
