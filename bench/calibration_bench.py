#!/usr/bin/env python3
"""Calibration wall time: the fast path vs --naive, in the same run (issue target: >= 10x).

Usage:
  bench/calibration_bench.py --model PATH [--build build] [--threads N] [--samples 8]
      [--context-len 1024] [--probe 32] [--trials 2] [--naive-layers all|LIST] [--json]

Runs `ripplekv calibrate` twice on the built-in data with the same settings, once fast and once
with --naive, and reports wall times, the speed-up, the largest relative difference between the
two profiles, and the fast path's achieved GFLOPS against the machine's SGEMM peak (the FLOP count
is the model's: linear layers over the rows each trial recomputes, attention, LM head).
--naive-layers limits the naive run to some layers (its time is then scaled to all layers and
the table says so).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def calibrate(exe, model, args, extra, out):
    cmd = [str(exe), "calibrate", "-q", "--model", str(model), "--samples", str(args.samples),
           "--context-len", str(args.context_len), "--probe", str(args.probe),
           "--trials", str(args.trials), "-t", str(args.threads), "--out", out] + extra
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0, json.load(open(out))


def flops(info, c, w, t, samples, layers):
    """Useful FLOPs of the fast path: one clean pass over C+W tokens per sample, then per
    (sample, layer l) T*W rows through layers l..L-1 plus the LM head."""
    d, f, L = info["d_model"], info["d_ff"], info["layers"]
    hq, hkv, hd, v = info["heads"], info["kv_heads"], info["head_dim"], info["vocab_size"]
    per_layer_token = 2 * (d * hq * hd * 2 + d * hkv * hd * 2 + 3 * d * f)
    attn = lambda keys: 4 * keys * hd * hq
    clean = (c + w) * (L * per_layer_token) + sum(attn(i) for i in range(c + w)) * L + w * 2 * d * v
    trials = 0
    for l in layers:
        rows = t * w
        trials += rows * (L - l) * (per_layer_token + attn(c + w / 2)) + rows * 2 * d * v
    return samples * (clean + trials)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--context-len", type=int, default=1024)
    ap.add_argument("--probe", type=int, default=32)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--naive-layers", default="all")
    ap.add_argument("--peak-gflops", type=float, default=None,
                    help="machine fp32 peak; default: measured by ops_bench's Linear")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    exe = args.build / "cli" / "ripplekv"
    info = json.loads(subprocess.run([str(exe), "info", "--json", str(args.model)], check=True,
                                     capture_output=True, text=True).stdout)
    L = info["layers"]
    with tempfile.TemporaryDirectory() as tmp:
        fast_s, fast = calibrate(exe, args.model, args, [], f"{tmp}/fast.json")
        naive_extra = ["--naive"]
        if args.naive_layers != "all":
            naive_extra += ["--layers", args.naive_layers]
        naive_s, naive = calibrate(exe, args.model, args, naive_extra, f"{tmp}/naive.json")
    naive_layers = [l["layer"] for l in naive["layers"]]
    naive_all_s = naive_s * L / len(naive_layers)
    fast_by_layer = {l["layer"]: l["mean_kl"] for l in fast["layers"]}
    max_rel = max(abs(fast_by_layer[l["layer"]] - l["mean_kl"]) / l["mean_kl"]
                  for l in naive["layers"])
    gflop = flops(info, args.context_len, args.probe, args.trials, args.samples, range(L)) / 1e9
    peak = args.peak_gflops
    if peak is None:
        out = subprocess.run([str(args.build / "bench" / "ops_bench"),
                              "--benchmark_filter=BM_LinearFfnUp/2048/%d" % args.threads,
                              "--benchmark_format=json"], check=True, capture_output=True,
                             text=True).stdout
        peak = json.loads(out)["benchmarks"][0]["GFLOPS"] / 1e9
    result = {"threads": args.threads, "samples": args.samples, "context_len": args.context_len,
              "probe": args.probe, "trials": args.trials, "layers": L,
              "fast_s": round(fast_s, 2), "naive_s": round(naive_s, 2),
              "naive_layers": len(naive_layers), "naive_all_layers_s": round(naive_all_s, 1),
              "speedup": round(naive_all_s / fast_s, 1),
              "max_rel_profile_difference": max_rel,
              "fast_gflop": round(gflop, 1), "fast_gflops": round(gflop / fast_s, 1),
              "sgemm_peak_gflops": round(peak, 1),
              "fraction_of_peak": round(gflop / fast_s / peak, 3)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        print(f"{k:<28} {v}")


if __name__ == "__main__":
    main()
