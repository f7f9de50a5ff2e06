#!/usr/bin/env python3
"""RippleKV engine vs llama.cpp on the same GGUF and threads, in one run.

Usage:
  bench/compare_engines.py --model PATH.gguf [--threads N] [--build build] [--weights stored,f32]
                           [--json]

Runs build/bench/engine_bench (Google Benchmark, counter tok_s) and bench/llamacpp_bench.py
(llama.cpp through llama-cpp-python, low-level llama_decode), prints a markdown table of
prefill tokens/s at 512 and 2048 tokens and decode tokens/s, and the ratio RippleKV / llama.cpp.
Needs `pip install llama-cpp-python==0.3.36` (it builds llama.cpp) and a built engine_bench.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ripplekv(build, model, threads, weights):
    out = subprocess.run(
        [str(build / "bench" / "engine_bench"), "--model", str(model), "--threads", str(threads),
         "--weights", weights,
         "--benchmark_format=json", "--benchmark_repetitions=3",
         "--benchmark_report_aggregates_only=true"],
        check=True, capture_output=True, text=True).stdout
    rows = {b["name"]: b for b in json.loads(out)["benchmarks"]}

    def pick(prefix):  # names look like BM_Prefill/512/min_time:3.000/real_time_median
        for name, row in rows.items():
            if name.startswith(prefix + "/") and name.endswith("real_time_median"):
                return row["tok_s"]
        raise KeyError(f"{prefix}: not in engine_bench output")
    return {"engine": f"ripplekv ({weights} weights)", "threads": threads,
            "prefill_512_tok_s": pick("BM_Prefill/512"),
            "prefill_2048_tok_s": pick("BM_Prefill/2048"),
            "decode_tok_s": pick("BM_Decode/128")}


def llamacpp(model, threads):
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "llamacpp_bench.py"), "--model", str(model),
         "--threads", str(threads), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--weights", default="stored,f32",
                    help="comma-separated engine weight storages to run (stored, f32)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    ours = {w: ripplekv(args.build, args.model, args.threads, w) for w in args.weights.split(",")}
    theirs = llamacpp(args.model, args.threads)
    keys = ("prefill_512_tok_s", "prefill_2048_tok_s", "decode_tok_s")
    if args.json:
        print(json.dumps({"ripplekv": ours, "llama.cpp": theirs,
                          "ratio": {w: {k: o[k] / theirs[k] for k in keys}
                                    for w, o in ours.items()}}, indent=2))
        return
    print(f"threads: {args.threads}; model: {args.model.name}; "
          f"llama-cpp-python {theirs.get('llama_cpp_python', '?')}")
    print("| measure | " + " | ".join(f"RippleKV {w} tok/s" for w in ours) +
          " | llama.cpp tok/s | " + " | ".join(f"ratio {w}" for w in ours) + " |")
    print("|---|" + "---:|" * (2 * len(ours) + 1))
    for k in keys:
        print(f"| {k.replace('_tok_s', '')} | " + " | ".join(f"{o[k]:.1f}" for o in ours.values()) +
              f" | {theirs[k]:.1f} | " + " | ".join(f"{o[k] / theirs[k]:.2f}" for o in ours.values()) +
              " |")


if __name__ == "__main__":
    main()
