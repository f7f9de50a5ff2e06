#!/usr/bin/env python3
"""Scheduler memory under abuse (docs/PERFORMANCE.md, "Scheduler memory under abuse").

Starts a real ripplekv-scheduler on loopback (plaintext, with a token file: an agent token bound
to one node and a submitter token), runs each abuse for a bounded time with
ripplekv-scheduler-abuse (bench/scheduler_abuse.cc), and samples the scheduler's resident memory
(VmRSS in /proc/PID/status) once a second meanwhile:

  watch   an agent token opens WatchBudgets for its own node with a random model hash and cancels
          it, from 4 threads, for --seconds;
  submit  jobs with --mib MiB of inline data each, for a model no worker holds (they stay
          pending), --jobs of them one after another: up to and past --max-pending-inline-mib.

Each abuse runs against a fresh scheduler and database. Prints, per abuse, the RSS at start, at
each sample and at the end, the calls made with their status codes, and the growth per call;
--json writes the same as one object. --scheduler-bin runs another build's scheduler (a
before/after comparison); --scheduler-arg passes a flag on (repeatable; e.g. one the other build
lacks is left out).

  bench/scheduler_soak.py --build build --seconds 60
  bench/scheduler_soak.py --build build --scheduler-bin OLD/ripplekv-scheduler --seconds 60
"""

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def find_bin(build, name, sub):
    for p in (build / sub / name, build / name):
        if p.is_file():
            return p
    sys.exit(f"{name} not found under {build}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Scheduler:
    def __init__(self, binary, tmp, args):
        self.addr = f"127.0.0.1:{free_port()}"
        self.node = "soak-node"
        agent, submitter = secrets.token_hex(24), secrets.token_hex(24)
        tokens = tmp / "tokens"
        tokens.write_text(f"agent:{self.node} {agent}\nsubmitter {submitter}\n")
        tokens.chmod(0o600)
        (tmp / "token-agent").write_text(agent + "\n")
        (tmp / "token-submitter").write_text(submitter + "\n")
        self.log = tmp / "scheduler.log"
        self.proc = subprocess.Popen(
            [str(binary), "--listen", self.addr, "--db", str(tmp / "db"), "--insecure",
             "--token-file", str(tokens), *args],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while "serving" not in self.log.read_text() and "listening" not in self.log.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"the scheduler did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_abuse(name, scheduler_bin, abuse_bin, sched_args, abuse_args, token, interval):
    with tempfile.TemporaryDirectory(prefix="soak-") as d:
        tmp = Path(d)
        s = Scheduler(scheduler_bin, tmp, sched_args)
        try:
            time.sleep(1)
            samples = [(0.0, rss_kib(s.proc.pid))]
            start = time.time()
            p = subprocess.Popen([str(abuse_bin), name, "--target", s.addr, "--token-file",
                                  str(tmp / token), *abuse_args],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out = {}
            reader = threading.Thread(target=lambda: out.update(
                zip(("stdout", "stderr"), p.communicate())))
            reader.start()
            while p.poll() is None:
                time.sleep(interval)
                samples.append((round(time.time() - start, 1), rss_kib(s.proc.pid)))
            reader.join()
            time.sleep(2 * interval)  # what is left once the calls are over
            samples.append((round(time.time() - start, 1), rss_kib(s.proc.pid)))
            if p.returncode != 0:
                sys.exit(f"{name}: the driver failed:\n{out.get('stderr', '')[-2000:]}")
            result = json.loads(out["stdout"].strip().splitlines()[-1])
        finally:
            s.stop()
    result["rss_kib"] = samples
    result["rss_start_mib"] = round(samples[0][1] / 1024, 1)
    result["rss_end_mib"] = round(samples[-1][1] / 1024, 1)
    result["rss_peak_mib"] = round(max(k for _, k in samples) / 1024, 1)
    calls = max(result["calls"], 1)
    result["bytes_per_call"] = round((samples[-1][1] - samples[0][1]) * 1024 / calls)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--scheduler-bin", type=Path, help="the ripplekv-scheduler to run")
    ap.add_argument("--scheduler-arg", action="append", default=[],
                    help="passed on to the scheduler (repeatable)")
    ap.add_argument("--seconds", type=float, default=60, help="length of the watch abuse")
    ap.add_argument("--mib", type=float, default=31, help="inline data per submitted job, MiB")
    ap.add_argument("--jobs", type=int, default=40, help="jobs the submit abuse submits")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--only", choices=("watch", "submit"), help="run one abuse")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    sched = a.scheduler_bin or find_bin(a.build, "ripplekv-scheduler", "scheduler/service")
    abuse = find_bin(a.build, "ripplekv-scheduler-abuse", "bench")
    results = {"scheduler": str(sched), "scheduler_args": a.scheduler_arg}
    if a.only in (None, "watch"):
        results["watch"] = run_abuse("watch", sched, abuse, a.scheduler_arg,
                                     ["--seconds", str(a.seconds), "--node", "soak-node"],
                                     "token-agent", a.interval)
    if a.only in (None, "submit"):
        results["submit"] = run_abuse("submit", sched, abuse, a.scheduler_arg,
                                      ["--mib", str(a.mib), "--jobs", str(a.jobs)],
                                      "token-submitter", a.interval)
    for name in ("watch", "submit"):
        if name not in results:
            continue
        r = results[name]
        print(f"{name}: {r['calls']} calls, status codes {r['codes']}; RSS {r['rss_start_mib']} "
              f"MiB at start, peak {r['rss_peak_mib']} MiB, {r['rss_end_mib']} MiB at the end "
              f"({r['bytes_per_call']} bytes per call)")
        step = max(1, len(r["rss_kib"]) // 12)
        print("  t(s)  RSS(MiB): " + ", ".join(
            f"{t:g}: {k / 1024:.0f}" for t, k in r["rss_kib"][::step] + [r["rss_kib"][-1]]))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
