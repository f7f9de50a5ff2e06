#!/usr/bin/env python3
"""Resident memory per rank of a model split over CPU ranks (`--tp N` under mpirun).

Usage:
  bench/tp_memory.py [--shape llama3-8b] [--layers 4] [--type q4_0] [--ranks 1,2,4]
                     [--build build] [--dir DIR] [--keep] [--json]

Writes a synthetic model with bench/make-model (--layers of the shape, to keep the file small),
then runs one calibration task (`ripplekv calibrate`, 1 sample, context 256, probe 16, layer 0,
2 trials) with the model whole and split over each rank count, and reports every rank's peak
resident memory (VmHWM, sampled from /proc while it runs) next to the model's stored weight bytes
(`ripplekv info`). Mapped weights count once touched: a rank touches only its slices, and of the
token embeddings only the rows of its tokens.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mib(pids):
    """VmHWM of each pid in MiB (0 when it is gone)."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
                out[pid] = int(m.group(1)) / 1024 if m else 0.0
        except OSError:
            out[pid] = 0.0
    return out


def rank_pids(marker):
    """Processes whose command line holds `marker`, with their MPI rank (0 when not under mpirun)."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"ripplekv") or marker.encode() not in cmd:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        rank = 0
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                rank = int(e.split(b"=", 1)[1])
        pids[int(entry)] = rank
    return pids


def run(cli, model, ranks):
    args = [cli, "calibrate", "--model", model, "--samples", "1", "--context-len", "256",
            "--probe", "16", "--layers", "0", "--trials", "2", "--threads", "1", "--json"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    if ranks > 1:
        args = ["mpirun", "-np", str(ranks), "--oversubscribe"] + args + ["--tp", str(ranks)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peaks = {}
    while proc.poll() is None:
        for pid, rank in rank_pids(model).items():
            hwm = peak_rss_mib([pid])[pid]
            peaks[rank] = max(peaks.get(rank, 0.0), hwm)
        time.sleep(0.05)
    if proc.returncode != 0:
        sys.exit(f"tp_memory: {' '.join(args)} failed: {proc.stderr.read().decode()[-500:]}")
    return [peaks.get(r, 0.0) for r in range(ranks)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="llama3-8b")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--type", default="q4_0")
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--dir")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="ripplekv_tp_memory_")
    model = os.path.join(work, f"{a.shape}-{a.layers}l-{a.type}.gguf")
    cli = os.path.join(a.build, "cli", "ripplekv")
    try:
        if not os.path.exists(model):
            subprocess.run([os.path.join(ROOT, "bench", "make-model"), "--shape", a.shape,
                            "--layers", str(a.layers), "--type", a.type, "--out", model],
                           check=True, env=dict(os.environ, RIPPLEKV_BUILD_DIR=a.build),
                           stdout=sys.stderr)
        info = json.loads(subprocess.run([cli, "info", "--json", model], check=True,
                                         capture_output=True, text=True).stdout)
        stored_mib = info["weight_bytes_stored"] / 2**20
        rows = []
        for n in [int(x) for x in a.ranks.split(",")]:
            print(f"tp_memory: {n} rank(s)", file=sys.stderr)
            rows.append({"ranks": n, "peak_rss_mib": run(cli, model, n)})
        if a.json:
            print(json.dumps({"model": os.path.basename(model), "stored_weight_mib": stored_mib,
                              "runs": rows}, indent=2))
        else:
            print(f"{os.path.basename(model)}: stored weights {stored_mib:.0f} MiB\n")
            print("| ranks | peak RSS per rank, MiB | largest / whole |")
            print("|---:|---|---:|")
            whole = rows[0]["peak_rss_mib"][0] if rows and rows[0]["ranks"] == 1 else None
            for r in rows:
                ranks = ", ".join(f"{v:.0f}" for v in r["peak_rss_mib"])
                share = f"{max(r['peak_rss_mib']) / whole:.2f}" if whole else "-"
                print(f"| {r['ranks']} | {ranks} | {share} |")
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
