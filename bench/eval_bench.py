#!/usr/bin/env python3
"""Evaluation throughput and what the shared prefill saves.

Usage:
  bench/eval_bench.py --model PATH [--build build] [--threads 2] [--samples 4] [--prompt-len 1024]
      [--tasks passkey,fidelity] [--budgets 64,128,256] [--profile P.json]

Runs `ripplekv eval` twice on the same examples, methods and budgets: once as it always runs (one
prefill per example serves every method x budget; compression happens after prefill) and once with
--no-shared-prefill (a prefill per method x budget, what a loop over methods would do). Reports
examples per minute, prefills, the wall-time saving, and checks that both runs print the same
table (the shared prefill must not change any score).
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def run(exe, args, extra):
    cmd = [str(exe), "eval", "--model", args.model, "--tasks", args.tasks, "--budgets",
           args.budgets, "--samples", str(args.samples), "--prompt-len", str(args.prompt_len),
           "--context-len", str(args.prompt_len), "--threads", str(args.threads), "--chat"]
    if args.profile:
        cmd += ["--profile", args.profile]
    cmd += extra
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    m = re.search(r"(\d+) examples, (\d+) prefills, ([0-9.]+) s: ([0-9.]+) examples/min \((\d+) methods", r.stderr)
    if not m:
        sys.exit(f"no summary line in:\n{r.stderr[-2000:]}")
    return {"examples": int(m.group(1)), "prefills": int(m.group(2)), "loop_s": float(m.group(3)),
            "per_min": float(m.group(4)), "methods": int(m.group(5)), "wall_s": wall,
            "table": r.stdout}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", default=os.environ.get("RIPPLEKV_BUILD_DIR", "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=1024)
    ap.add_argument("--tasks", default="passkey,fidelity")
    ap.add_argument("--budgets", default="64,128,256")
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    exe = Path(args.build) / "cli" / "ripplekv"
    shared = run(exe, args, [])
    separate = run(exe, args, ["--no-shared-prefill"])
    print(f"{'':24s} {'examples':>8s} {'prefills':>8s} {'loop s':>8s} {'examples/min':>13s}")
    for name, r in (("shared prefill", shared), ("prefill per method", separate)):
        print(f"{name:24s} {r['examples']:8d} {r['prefills']:8d} {r['loop_s']:8.1f} {r['per_min']:13.2f}")
    print(f"saving: {100 * (1 - shared['loop_s'] / separate['loop_s']):.1f}% of the evaluation time, "
          f"{separate['prefills'] - shared['prefills']} prefills; "
          f"tables identical: {shared['table'] == separate['table']}")


if __name__ == "__main__":
    main()
