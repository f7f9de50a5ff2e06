#!/usr/bin/env python3
"""Real model sizes on one CPU box: a synthetic model of a real shape, end to end.

Usage:
  bench/large_model_bench.py [--shape llama3-8b] [--type q4_0] [--threads 2] [--build build]
                             [--dir DIR] [--keep] [--no-llamacpp] [--json]

Writes the model with bench/make-model into DIR (default: a temporary directory; ~4.5 GB for
llama3-8b in Q4_0, deleted afterwards unless --keep), then measures, each in its own process
(peak RSS from /usr/bin/time -v):
  info         `ripplekv info` (headers only): wall time and peak RSS;
  prefill      engine_bench BM_Prefill/512 with --weights stored: tokens/s, peak RSS, and the
               share of the machine's fp32 GEMM peak (2 * layer matmul parameters * 512 FLOPs, plus
               the LM head for the last row, over the prefill time, against ops_bench's Linear 512/2048 x 576 -> 1536 rate, the
               OpenBLAS SGEMM peak, on the same threads);
  calibration  `ripplekv calibrate` of one task: 1 sample x layer 0 x 2 trials, context 512,
               probe 32 (layer 0 is the costliest: the trials resume at the first layer);
  llama.cpp    bench/llamacpp_bench.py --prefill-only 512 on the same file (needs
               llama-cpp-python, as bench/compare_engines.py).
Prints a markdown table (or one JSON object); progress on stderr.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def timed(cmd):
    """Runs cmd under /usr/bin/time -v: (stdout, wall seconds, peak RSS MiB)."""
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v", *map(str, cmd)], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return p.stdout, wall, rss_kb / 1024


def sgemm_peak(build, threads):
    """Largest Linear GFLOP/s ops_bench reports at `threads` threads (its benchmarks take the
    thread count as their last argument; the GFLOPS counter is a rate in FLOP/s)."""
    out = subprocess.run([build / "bench" / "ops_bench", f"--benchmark_filter=Linear.*/{threads}/",
                          "--benchmark_format=json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        log(f"ops_bench failed: {out.stderr.strip()[-300:]}")
        return None
    rates = [b["GFLOPS"] / 1e9 for b in json.loads(out.stdout).get("benchmarks", [])
             if "GFLOPS" in b]
    return max(rates) if rates else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--type", default="q4_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cli = args.build / "cli" / "ripplekv"
    work = args.dir or Path(tempfile.mkdtemp(prefix="ripplekv-large-"))
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"{args.shape}-{args.type}.gguf"
    result = {"shape": args.shape, "type": args.type, "threads": args.threads}
    try:
        if not model.exists():
            log(f"writing {model}")
            _, wall, _ = timed([ROOT / "bench" / "make-model", "--shape", args.shape, "--type",
                                args.type, "--out", model, "-q"])
            result["make_model_s"] = round(wall, 1)
        result["file_gib"] = round(model.stat().st_size / 2**30, 2)

        log("info")
        out, wall, rss = timed([cli, "info", model, "--json"])
        result["info"] = {"wall_s": round(wall, 2), "peak_rss_mib": round(rss)}
        info = json.loads(out)

        log("prefill 512 (engine_bench, stored weights)")
        out, wall, rss = timed([args.build / "bench" / "engine_bench", "--model", model,
                                "--threads", args.threads, "--weights", "stored",
                                "--benchmark_filter=BM_Prefill/512/",
                                "--benchmark_format=json"])
        bench = json.loads(out)["benchmarks"][0]
        tok_s = bench["tok_s"]
        c = info
        d, ff, layers = c["d_model"], c["d_ff"], c["layers"]
        q = c["heads"] * c["head_dim"]
        kv = c["kv_heads"] * c["head_dim"]
        # Every row runs the layers' projections; the LM head runs for the last row only.
        layer_params = layers * (d * q + 2 * d * kv + q * d + 3 * d * ff)
        flops = 2 * layer_params * 512 + 2 * c["vocab_size"] * d
        gflops = flops / (512 / tok_s) / 1e9
        peak = sgemm_peak(args.build, args.threads)
        result["prefill_512"] = {"tok_s": round(tok_s, 2), "seconds": round(512 / tok_s, 1),
                                 "gflops": round(gflops, 1), "peak_rss_mib": round(rss),
                                 "sgemm_peak_gflops": peak and round(peak, 1),
                                 "share_of_peak": peak and round(gflops / peak, 3)}

        log("one calibration task (1 sample x layer 0 x 2 trials, C 512, W 32)")
        out, wall, rss = timed([cli, "calibrate", "--model", model, "--threads", args.threads,
                                "--samples", 1, "--layers", 0, "--trials", 2, "--context-len",
                                512, "--probe", 32, "--json"])
        result["calibration_task"] = {"wall_s": round(wall, 1), "peak_rss_mib": round(rss)}

        if not args.no_llamacpp:
            log("llama.cpp prefill 512")
            try:
                out, wall, rss = timed([sys.executable, ROOT / "bench" / "llamacpp_bench.py",
                                        "--model", model, "--threads", args.threads, "--json",
                                        "--runs", 1, "--prefill-only", 512])
                lc = json.loads(out)
                result["llama.cpp"] = {"prefill_512_tok_s": lc["prefill_512_tok_s"],
                                       "peak_rss_mib": round(rss),
                                       "llama_cpp_python": lc.get("llama_cpp_python")}
            except (RuntimeError, ValueError) as e:  # report what was measured so far
                result["llama.cpp"] = {"error": str(e)[-300:]}
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    p = result["prefill_512"]
    print(f"{args.shape} {args.type}, {result['file_gib']} GiB, {args.threads} threads")
    print("| measure | value |")
    print("|---|---|")
    print(f"| info | {result['info']['wall_s']} s, peak RSS {result['info']['peak_rss_mib']} MiB |")
    print(f"| prefill 512 (RippleKV, stored) | {p['tok_s']} tok/s ({p['seconds']} s), "
          f"{p['gflops']} GFLOP/s = {p['share_of_peak']} of {p['sgemm_peak_gflops']}, "
          f"peak RSS {p['peak_rss_mib']} MiB |")
    t = result["calibration_task"]
    print(f"| one calibration task | {t['wall_s']} s, peak RSS {t['peak_rss_mib']} MiB |")
    if "llama.cpp" in result and "error" in result["llama.cpp"]:
        print(f"| prefill 512 (llama.cpp) | failed: {result['llama.cpp']['error'][-120:]} |")
    elif "llama.cpp" in result:
        lc = result["llama.cpp"]
        print(f"| prefill 512 (llama.cpp {lc['llama_cpp_python']}) | {lc['prefill_512_tok_s']} "
              f"tok/s, peak RSS {lc['peak_rss_mib']} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
