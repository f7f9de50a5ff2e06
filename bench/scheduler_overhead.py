#!/usr/bin/env python3
"""Scheduler overhead: dispatch and result throughput with no-compute workers, and the share of
worker time spent waiting for work in a real job.

Usage:
  bench/scheduler_overhead.py --model PATH [--build build] [--workers 1,2,4,8] [--samples 64,512]
      [--prefetch N] [--real-samples 8] [--real-context 512] [--no-real] [--no-tls] [--history N]
      [--verify F] [--scheduler-bin PATH] [--json]

--verify F submits every job with `ripplekv submit --verify F` (unset: the scheduler's default,
0.05); --scheduler-bin runs another build's ripplekv-scheduler (a before/after comparison of the
scheduler alone: the workers and the CLI stay this build's).

Part 1 (overhead): a ripplekv-scheduler (fresh RocksDB, fsync on every durable change, TLS with
client certificates and bearer tokens, as deployed; --no-tls: plaintext) and N
`ripplekv-worker --no-compute` processes, which answer every task with synthetic KL values at
once; a job of S samples x all layers x 2 trials is submitted and followed until SUCCEEDED.
Reported: tasks dispatched per second and trial results stored per second over the job's wall
time (submit to success), i.e. everything but the model: planning, leasing, the gRPC stream,
results and task completions written to RocksDB, and the final aggregation into a profile; and
the marginal rates between the smallest and largest job, where the fixed costs cancel. Also the
CPU time the scheduler and all workers used per task (user + system, from /proc): with every
process on one machine, their sum is what bounds the rate. Hand-out latency is each worker's wait
from a task_done sent with nothing queued to its next assignment (p99: the worst worker's).

Part 2 (wait share): 2 real workers (1 thread each) run the quickstart job (8 samples x 512
context, 32 probe tokens, 2 trials, all layers). Each worker logs, when drained, the time it spent
handling tasks; waiting share = 1 - busy / job wall time.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_bin(build, name, sub):
    for p in (build / name, build / sub / name):
        if p.exists():
            return p
    sys.exit(f"{name} not found under {build}")


class Cluster:
    def __init__(self, build, model, workers, no_compute, tmp, tls=True, history=0, prefetch=None,
                 scheduler_bin=None, verify=None):
        self.cli = find_bin(build, "ripplekv", "cli")
        self.addr = f"127.0.0.1:{free_port()}"
        self.tmp = tmp
        self.procs = []
        self.logs = []
        sched = scheduler_bin or find_bin(build, "ripplekv-scheduler", "scheduler/service")
        self.verify = verify
        worker = find_bin(build, "ripplekv-worker", "worker/service")
        security, worker_security, self.client_security = ["--insecure"], [], []
        if tls:  # as deployed: TLS with client certificates, and bearer tokens (docs/SECURITY.md)
            t = tmp / "tls"
            subprocess.run([str(ROOT / "deploy/local/make-tls"), str(t)], check=True)
            security = ["--tls-cert", t / "server.pem", "--tls-key", t / "server.key",
                        "--tls-client-ca", t / "ca.pem", "--token-file", t / "tokens"]
            client = ["--tls-ca", t / "ca.pem", "--tls-cert", t / "client.pem",
                      "--tls-key", t / "client.key"]
            worker_security = client + ["--token-file", t / "token-worker"]
            self.client_security = [str(a) for a in client + ["--token-file",
                                                              t / "token-submitter"]]
        if history > 0:  # finished jobs already in the database (bench/store_history.cc)
            subprocess.run([str(find_bin(build, "ripplekv-store-history", "bench")),
                            str(tmp / "db"), str(history)], check=True, capture_output=True)
        self._spawn([sched, "--listen", self.addr, "--db", tmp / "db", *security], "scheduler")
        self._wait(lambda: self._cli("jobs").returncode == 0, 30, "scheduler")
        for i in range(workers):
            args = [worker, "--scheduler", self.addr, "--model", model, "--threads", "1",
                    "--id", f"w{i}", *worker_security]
            if no_compute:
                args.append("--no-compute")
            if prefetch is not None:
                args += ["--prefetch", str(prefetch)]
            log = self._spawn(args, f"w{i}")
            self._wait(lambda: "registered with" in log.read_text(), 60, f"worker {i}")

    def _spawn(self, args, name):
        log = self.tmp / f"{name}.log"
        f = open(log, "w")
        self.procs.append(subprocess.Popen([str(a) for a in args], stdout=f, stderr=f))
        self.logs.append(log)
        return log

    @staticmethod
    def _wait(pred, timeout, what):
        deadline = time.time() + timeout
        while not pred():
            if time.time() > deadline:
                sys.exit(f"{what} not ready in {timeout} s")
            time.sleep(0.1)

    def _cli(self, *args):
        return subprocess.run([str(self.cli), args[0], "--scheduler", self.addr,
                               *self.client_security, *args[1:]],
                              capture_output=True, text=True)

    def run_job(self, model, samples, context, probe):
        t0 = time.perf_counter()
        r = self._cli("submit", "-q", "--model", str(model), "--samples", str(samples),
                      "--context-len", str(context), "--probe", str(probe), "--trials", "2",
                      *(["--verify", str(self.verify)] if self.verify is not None else []),
                      "--wait", "--json")
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"job failed: {r.stderr}")
        return wall

    @staticmethod
    def _cpu_s(proc):
        """CPU seconds (user + system) `proc` has used so far."""
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def scheduler_cpu_s(self):
        return self._cpu_s(self.procs[0])

    def workers_cpu_s(self):
        return sum(self._cpu_s(p) for p in self.procs[1:])

    def group_commit(self):
        """(completions, store writes) from the scheduler's log after stop()."""
        m = re.search(r"(\d+) task completions in (\d+) store writes", self.logs[0].read_text())
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def stop(self):
        # Workers first (they drain and print their summary), then the scheduler.
        for p in self.procs[1:] + self.procs[:1]:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    def handout_ms(self):
        """Per worker: (p50, p99) ms from a task_done sent to the next assignment."""
        out = []
        for log in self.logs[1:]:
            m = re.search(r"hand-out latency p50 ([0-9.]+) ms p99 ([0-9.]+) ms", log.read_text())
            out.append((float(m.group(1)), float(m.group(2))) if m else (float("nan"),) * 2)
        return out

    def busy_seconds(self):
        out = []
        for log in self.logs[1:]:
            m = re.search(r"busy ([0-9.]+) s of ([0-9.]+) s connected", log.read_text())
            out.append(float(m.group(1)) if m else float("nan"))
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", default=os.environ.get("RIPPLEKV_BUILD_DIR", "build"))
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--no-tls", action="store_true", help="plaintext without tokens")
    ap.add_argument("--history", type=int, default=0,
                    help="finished jobs (16 KiB inline data each) in the database beforehand")
    ap.add_argument("--samples", default="64,512")
    ap.add_argument("--prefetch", type=int, default=None,
                    help="the workers' --prefetch (default: theirs)")
    ap.add_argument("--real-samples", type=int, default=8)
    ap.add_argument("--real-context", type=int, default=512)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--verify", type=float, default=None,
                    help="submit with --verify F (unset: the scheduler's default)")
    ap.add_argument("--scheduler-bin", type=Path, default=None,
                    help="the ripplekv-scheduler to run (default: the build's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    build = Path(args.build)
    layers = 30
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for samples in [int(s) for s in args.samples.split(",")]:
            with tempfile.TemporaryDirectory() as d:
                c = Cluster(build, args.model, workers, True, Path(d), tls=not args.no_tls,
                            history=args.history, prefetch=args.prefetch,
                            scheduler_bin=args.scheduler_bin, verify=args.verify)
                try:
                    cpu0, wcpu0 = c.scheduler_cpu_s(), c.workers_cpu_s()
                    wall = c.run_job(args.model, samples, 64, 8)
                    cpu, wcpu = c.scheduler_cpu_s() - cpu0, c.workers_cpu_s() - wcpu0
                finally:
                    c.stop()
                handout = c.handout_ms()
                completions, writes = c.group_commit()
            tasks = samples * layers
            rows.append({"part": "no-compute", "workers": workers, "tasks": tasks,
                         "wall_s": round(wall, 3), "tasks_per_s": round(tasks / wall, 1),
                         "results_per_s": round(2 * tasks / wall, 1),
                         "handout_p50_ms": round(max(h[0] for h in handout), 3),
                         "handout_p99_ms": round(max(h[1] for h in handout), 3),
                         "scheduler_cpu_s": round(cpu, 3),
                         "scheduler_cpu_ms_per_task": round(1000 * cpu / tasks, 3),
                         "workers_cpu_ms_per_task": round(1000 * wcpu / tasks, 3),
                         "workers_cpu_s": round(wcpu, 3),
                         "completions_per_write": round(completions / max(writes, 1), 2)})
    # Marginal rates between the smallest and the largest job of each worker count: the fixed
    # costs (hashing the model at submit, each worker tokenizing the job's data once, the final
    # aggregation) cancel out.
    for workers in sorted({r["workers"] for r in rows}):
        mine = sorted((r for r in rows if r["workers"] == workers), key=lambda r: r["tasks"])
        if len(mine) >= 2 and mine[-1]["wall_s"] > mine[0]["wall_s"]:
            dt = mine[-1]["tasks"] - mine[0]["tasks"]
            dw = mine[-1]["wall_s"] - mine[0]["wall_s"]
            rows.append({"part": "marginal", "workers": workers, "tasks": dt,
                         "wall_s": round(dw, 3), "tasks_per_s": round(dt / dw, 1),
                         "results_per_s": round(2 * dt / dw, 1),
                         "scheduler_cpu_ms_per_task": round(
                             1000 * (mine[-1]["scheduler_cpu_s"] - mine[0]["scheduler_cpu_s"]) / dt,
                             3),
                         "workers_cpu_ms_per_task": round(
                             1000 * (mine[-1]["workers_cpu_s"] - mine[0]["workers_cpu_s"]) / dt, 3)})
    if not args.no_real:
        with tempfile.TemporaryDirectory() as d:
            c = Cluster(build, args.model, 2, False, Path(d), prefetch=args.prefetch,
                        scheduler_bin=args.scheduler_bin, verify=args.verify)
            try:
                wall = c.run_job(args.model, args.real_samples, args.real_context, 32)
            finally:
                c.stop()
            busy = c.busy_seconds()
        rows.append({"part": "real", "workers": 2, "tasks": args.real_samples * layers,
                     "wall_s": round(wall, 3),
                     "busy_s": [round(b, 3) for b in busy],
                     "waiting_share": [round(1 - b / wall, 4) for b in busy]})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        if r["part"] in ("no-compute", "marginal"):
            cpu = (f"  CPU/task scheduler {r['scheduler_cpu_ms_per_task']:.3f} ms"
                   f" workers {r['workers_cpu_ms_per_task']:.3f} ms")
            handout = (f"  hand-out p50 {r['handout_p50_ms']:.2f} ms p99 {r['handout_p99_ms']:.2f} ms"
                       f"{cpu}  {r['completions_per_write']:.2f} completions/write"
                       if "handout_p99_ms" in r else cpu)
            print(f"{r['part']:10s}  workers {r['workers']}  tasks {r['tasks']:5d}  wall {r['wall_s']:7.2f} s"
                  f"  dispatch {r['tasks_per_s']:8.1f} tasks/s  store {r['results_per_s']:8.1f} results/s"
                  + handout)
        else:
            shares = ", ".join(f"{100 * s:.1f}%" for s in r["waiting_share"])
            print(f"real SmolLM2 job  workers 2  tasks {r['tasks']}  wall {r['wall_s']:.2f} s"
                  f"  busy {r['busy_s']} s  waiting {shares}")


if __name__ == "__main__":
    main()
