#!/usr/bin/env python3
"""llama.cpp side of the RippleKV throughput comparison (CPU).

Usage:
  bench/llamacpp_bench.py --model PATH.gguf --threads N [--json] [--text FILE] [--runs 3]
                          [--prefill-only L | --decode-only [--prompt-batch B]]

Measures, through llama.cpp's low-level API (llama_decode on explicit batches, so only model
evaluation is timed — no tokenization, sampling or Python-side logits copies):
  prefill_512_tok_s, prefill_2048_tok_s  one batch of L prompt tokens into a fresh context with
                                         n_ctx = n_batch = n_ubatch = L; logits for the last
                                         token only; median of --runs after one warm-up run
  decode_tok_s                           128 greedy tokens, one llama_decode each, after an
                                         untimed 512-token prefill (in batches of B tokens with
                                         --prompt-batch, else one batch); only the 128 decode
                                         calls are timed; median of --runs after one warm-up run
--decode-only skips the prefill measurements: for a llama.cpp build whose large-batch path fails
on this machine (its AMX kernels crash in some virtual machines; see docs/PERFORMANCE.md), decode
still measures with --prompt-batch 32.
Prompt tokens are deterministic: --text (default the GPL-3 licence text) tokenized with
add_special=true, repeated as needed.

Output: one JSON object on stdout with --json, otherwise a small table; progress on stderr.
JSON keys: engine, threads, prefill_512_tok_s, prefill_2048_tok_s, decode_tok_s, plus
llama_cpp_python, llama_cpp_commit, model, flash_attn, runs.
Exit codes: 0 success, 1 failure (message on stderr), 2 usage error.
"""

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

PREFILL_LENGTHS = [512, 2048]
DECODE_PROMPT = 512
DECODE_TOKENS = 128
DEFAULT_TEXT = Path("/usr/share/common-licenses/GPL-3")


def log(msg):
    print(f"llamacpp_bench: {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, llama_cpp, model_path, threads):
        self.L = llama_cpp
        self.threads = threads

        @llama_cpp.llama_log_callback
        def callback(level, text, _user_data):
            if level == 3:  # GGML_LOG_LEVEL_ERROR
                sys.stderr.write(text.decode("utf-8", errors="replace"))

        self._log_callback = callback  # keep alive: llama.cpp holds the raw pointer
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), mparams)
        if not self.model:
            raise RuntimeError(f"{model_path}: llama.cpp failed to load the model")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text):
        L = self.L
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, True, False)
        if n < 0:
            raise RuntimeError(f"llama_tokenize failed ({n})")
        return list(buf[:n])

    def context(self, n_ctx, n_batch):
        L = self.L
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = cp.n_ubatch = n_batch
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = self.threads
        cp.no_perf = True
        ctx = L.llama_init_from_model(self.model, cp)
        if not ctx:
            raise RuntimeError(f"llama_init_from_model failed (n_ctx {n_ctx})")
        return ctx

    def _fill(self, batch, tokens, pos0, last_only):
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = pos0 + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 0 if last_only and i + 1 < len(tokens) else 1
        batch.n_tokens = len(tokens)

    def _decode(self, ctx, batch):
        rc = self.L.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.L.llama_synchronize(ctx)

    def prefill(self, tokens, runs):
        """Median tokens/s of one-batch prefill of `tokens` into a cleared cache."""
        L = self.L
        n = len(tokens)
        ctx = self.context(n, n)
        batch = L.llama_batch_init(n, 0, 1)
        try:
            times = []
            for r in range(runs + 1):
                L.llama_memory_clear(L.llama_get_memory(ctx), True)
                self._fill(batch, tokens, 0, last_only=True)
                t0 = time.perf_counter()
                self._decode(ctx, batch)
                dt = time.perf_counter() - t0
                if r > 0:  # run 0 is the warm-up
                    times.append(dt)
            return n / statistics.median(times)
        finally:
            L.llama_batch_free(batch)
            L.llama_free(ctx)

    def decode(self, prompt, n_gen, runs, prompt_batch):
        """Median tokens/s of n_gen single-token greedy decode steps after an untimed prefill
        of `prompt` in batches of `prompt_batch` tokens."""
        L = self.L
        n = len(prompt)
        ctx = self.context(n + n_gen, prompt_batch)
        batch = L.llama_batch_init(prompt_batch, 0, 1)
        try:
            rates = []
            for r in range(runs + 1):
                L.llama_memory_clear(L.llama_get_memory(ctx), True)
                for p0 in range(0, n, prompt_batch):
                    chunk = prompt[p0:p0 + prompt_batch]
                    self._fill(batch, chunk, p0, last_only=True)
                    self._decode(ctx, batch)
                elapsed = 0.0
                for step in range(n_gen):
                    next_tok = self._argmax(L.llama_get_logits_ith(ctx, -1))
                    self._fill(batch, [next_tok], n + step, last_only=True)
                    t0 = time.perf_counter()
                    self._decode(ctx, batch)
                    elapsed += time.perf_counter() - t0
                if r > 0:
                    rates.append(n_gen / elapsed)
            return statistics.median(rates)
        finally:
            L.llama_batch_free(batch)
            L.llama_free(ctx)

    def _argmax(self, ptr):
        import numpy as np  # noqa: PLC0415  (only needed here)
        return int(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).argmax())


def ggml_commit(llama_cpp):
    try:
        lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
        lib.ggml_commit.restype = ctypes.c_char_p
        return lib.ggml_commit().decode()
    except (OSError, AttributeError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path, help="GGUF model file")
    ap.add_argument("--threads", required=True, type=int, help="CPU threads")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="source of prompt tokens")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per measurement (median)")
    ap.add_argument("--prefill-only", type=int, default=0, metavar="L",
                    help="measure only the prefill of L tokens (large models)")
    ap.add_argument("--decode-only", action="store_true", help="measure only decode")
    ap.add_argument("--prompt-batch", type=int, default=DECODE_PROMPT, metavar="B",
                    help=f"tokens per llama_decode call of decode's untimed {DECODE_PROMPT}-token "
                         "prompt")
    args = ap.parse_args()
    if args.threads < 1 or args.runs < 1:
        ap.error("--threads and --runs must be >= 1")
    if not 1 <= args.prompt_batch <= DECODE_PROMPT:
        ap.error(f"--prompt-batch must be in [1, {DECODE_PROMPT}]")
    if args.decode_only and args.prefill_only > 0:
        ap.error("--decode-only and --prefill-only exclude each other")
    for p, what in ((args.model, "--model"), (args.text, "--text")):
        if not p.is_file():
            ap.error(f"{what} {p}: no such file")

    try:
        import llama_cpp  # noqa: PLC0415
    except ImportError as e:
        log(f"error: cannot import llama_cpp ({e}); pip install llama-cpp-python==0.3.36")
        return 1
    try:
        bench = Bench(llama_cpp, args.model, args.threads)
        base = bench.tokenize(args.text.read_text(encoding="utf-8"))
        if not base:
            raise RuntimeError(f"{args.text}: tokenizes to nothing")
        lengths = ([args.prefill_only] if args.prefill_only > 0 else
                   [] if args.decode_only else PREFILL_LENGTHS)
        need = max(lengths + [DECODE_PROMPT])
        tokens = (base * (need // len(base) + 1))[:need]
        result = {"engine": "llama.cpp", "threads": args.threads}
        for n in lengths:
            log(f"prefill {n} tokens, {args.runs} runs + warm-up")
            result[f"prefill_{n}_tok_s"] = round(bench.prefill(tokens[:n], args.runs), 2)
        if args.prefill_only <= 0:
            log(f"decode {DECODE_TOKENS} tokens after a {DECODE_PROMPT}-token prompt")
            result["decode_tok_s"] = round(
                bench.decode(tokens[:DECODE_PROMPT], DECODE_TOKENS, args.runs, args.prompt_batch),
                2)
    except (RuntimeError, OSError, UnicodeDecodeError) as e:
        log(f"error: {e}")
        return 1
    result.update({"llama_cpp_python": llama_cpp.__version__,
                   "llama_cpp_commit": ggml_commit(llama_cpp),
                   "model": args.model.name, "flash_attn": "auto", "runs": args.runs})
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:<20} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
