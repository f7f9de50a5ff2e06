#!/usr/bin/env python3
"""Scheduler sizing: memory and disk as jobs accumulate (docs/OPERATIONS.md, "Sizing").

Usage: bench/scheduler_sizing.py --model PATH [--build build] [--jobs 1000] [--step 250]
    [--samples 8] [--no-tls] [--json]

A ripplekv-scheduler (fresh RocksDB, fsync on, TLS and tokens as deployed unless --no-tls) and
one `ripplekv-worker --no-compute` (synthetic KL at once: the scheduler's own costs only). Jobs of
--samples samples x all layers x 2 trials are submitted one after another, each waited for; at
every --step jobs the scheduler's resident memory (VmRSS, and its peak VmHWM, from /proc) and the
database directory's size on disk are recorded. Nothing is purged (retention keeps a week by
default), so the disk column is what a week of this many jobs costs before retention.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scheduler_overhead import Cluster  # noqa: E402


def status_kib(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def dir_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--step", type=int, default=250)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--no-tls", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model_hash = subprocess.run([str(Path(args.build) / "cli/ripplekv"), "hash", args.model],
                                capture_output=True, text=True, check=True).stdout.split()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cluster = Cluster(Path(args.build), args.model, 1, True, tmp, tls=not args.no_tls)
        pid = cluster.procs[0].pid

        def record(jobs, wall):
            rows.append({"jobs": jobs, "rss_mib": status_kib(pid, "VmRSS") / 1024,
                         "peak_rss_mib": status_kib(pid, "VmHWM") / 1024,
                         "db_mib": dir_bytes(tmp / "db") / 2**20, "wall_s": wall})

        t0 = time.perf_counter()
        record(0, 0.0)
        try:
            for j in range(1, args.jobs + 1):
                r = cluster._cli("submit", "-q", "--model", args.model, "--model-hash",
                                 model_hash, "--samples", str(args.samples), "--context-len",
                                 "64", "--probe", "8", "--trials", "2", "--seed", str(j), "--wait")
                if r.returncode != 0:
                    sys.exit(f"job {j} failed: {r.stderr}")
                if j % args.step == 0:
                    record(j, time.perf_counter() - t0)
        finally:
            cluster.stop()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| jobs | scheduler RSS, MiB | peak RSS, MiB | database on disk, MiB | wall, s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['jobs']:,} | {r['rss_mib']:.1f} | {r['peak_rss_mib']:.1f} | "
              f"{r['db_mib']:.1f} | {r['wall_s']:.0f} |")
    first, last = rows[0], rows[-1]
    per = 1000 / max(1, last["jobs"])
    print(f"\nper 1,000 jobs of {args.samples} samples x all layers x 2 trials: "
          f"+{(last['rss_mib'] - first['rss_mib']) * per:.1f} MiB RSS, "
          f"+{(last['db_mib'] - first['db_mib']) * per:.1f} MiB on disk")


if __name__ == "__main__":
    main()
