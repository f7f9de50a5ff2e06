#!/usr/bin/env python3
"""A kvpress serving process whose budget map ripplekv-agent swaps while it runs (docs/PYTHON.md).

It loads a model with transformers (sdpa attention, CPU or GPU), applies the RippleKV map at
--map (if there is one yet) through ripplekv.kvpress.MapPress, and answers requests with kvpress's
pipeline: one JSON object per line on stdin, `{"context": TEXT, "question": TEXT,
"max_new_tokens": N}`, one per line on stdout, `{"answer": TEXT, "map_version": V, "kept": [tokens
attention saw per layer after the prefill]}`. A ReloadServer on --socket lets the agent's apply
hook swap the map between requests:

    python docs/examples/kvpress_server.py --model SmolLM2.gguf --map /srv/map.json \\
        --socket /run/serving/reload.sock
    ripplekv-agent --scheduler ... --model-hash H --node-id n1 --out /srv/map.json \\
        --format native --apply-cmd 'python -m ripplekv.reload --socket /run/serving/reload.sock'

A map the process cannot use (another model's shape, layers below SnapKV's window) is refused by
the hook and the previous map stays in use.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, pipeline

from ripplekv.kvpress import MapPress, scorer_for, visible_tokens
from ripplekv.reload import ReloadServer


def load(model_path, threads):
    torch.set_num_threads(threads)
    path = Path(model_path)
    if path.is_file():  # a GGUF file
        kwargs = {"gguf_file": path.name}
        path = path.parent
    else:  # a transformers checkpoint directory
        kwargs = {}
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32,
                                                 attn_implementation="sdpa", **kwargs).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path), **kwargs)
    return model, tokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="GGUF file or transformers checkpoint")
    parser.add_argument("--map", help="the map file the agent writes (may not exist yet)")
    parser.add_argument("--socket", required=True, help="where the apply hook reaches it")
    parser.add_argument("--window", type=int, default=64, help="SnapKV's window (its floor)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    model, tokenizer = load(args.model, args.threads)
    scorer, floor = scorer_for("snapkv", window=args.window)
    press = MapPress(budgets=None, scorer=scorer, floor=floor)
    press.post_init_from_model(model)  # the model's shape, checked on every swap
    if args.map and os.path.exists(args.map):
        press.update(args.map)
    server = ReloadServer(press, args.socket)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer)
    print(json.dumps({"ready": True, "socket": args.socket}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        cache = DynamicCache()
        with torch.inference_mode():
            answer = pipe(request["context"], question=request.get("question", ""), press=press,
                          cache=cache, max_new_tokens=request.get("max_new_tokens", 16))
        print(json.dumps({"answer": answer["answer"], "map_version": server.version,
                          "kept": visible_tokens(model, cache)}), flush=True)
    server.close()


if __name__ == "__main__":
    main()
