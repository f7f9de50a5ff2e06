"""RippleKV maps against kvpress's own allocations, inside kvpress, on RippleKV's fidelity windows.

    ripplekv examples --model M.gguf --tasks fidelity --samples 40 -o windows.jsonl
    ripplekv budgets --profile P.json --avg-budget 128 --ratio 4 --selection snapkv --window 64 \
        -o maps/ripple-128.json
    python -m ripplekv.kvpress_compare --model M.gguf --examples windows.jsonl --budgets 128 \
        --map ripple+snapkv=maps/ripple-{budget}.json --records-out records.jsonl
    ripplekv compare records.jsonl --pair ripple+snapkv,snapkv --pair ripple+snapkv,pyramidkv

Every window is run by transformers (SmolLM2 from the same GGUF the engine reads) with kvpress
compressing the prefill, and scored as `ripplekv eval` scores fidelity (eval/fidelity_task.h): row
0 of the continuation's logits is the prefill's last row, rows 1..W-1 come from teacher-forcing
the continuation at its true positions on the compressed cache (one token at a time where the
layers' caches differ in length, as kvpress's PyramidKVPress leaves them: sdpa's mask for a block
of tokens is built from layer 0's length and crashes); KL(full || compressed), top-1
agreement and ΔNLL per window. Methods at each average budget B (tokens per layer, matched
memory):

- `snapkv`: kvpress's SnapKVPress, every layer B tokens (a ratio chosen so kvpress keeps exactly B);
- `pyramidkv`: kvpress's PyramidKVPress at the same ratio, with the largest beta that keeps its
  smallest layer at its window (`pyramid_beta`; at kvpress's default beta 20 the pyramid falls
  back to uniform below about 20 windows of budget);
- every `--map NAME=FILE`: a RippleKV map applied by ripplekv.kvpress.MapPress with SnapKV's
  scores (`{budget}` in FILE is replaced by B).

The records file has eval's format (eval/records.h), so `ripplekv compare` reads it.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from kvpress import BasePress, PyramidKVPress, SnapKVPress
from transformers import AutoModelForCausalLM, DynamicCache

from ripplekv.kvpress import KVPRESS_SNAPKV_WINDOW, press_from_map, visible_tokens

Example = Dict[str, Any]


def read_examples(path: str) -> List[Example]:
    """The fidelity examples of a `ripplekv examples` file (other tasks skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            ex = json.loads(line)
            if ex.get("task") != "fidelity":
                continue
            if not ex.get("prompt") or len(ex.get("continuation") or ()) < 1:
                raise ValueError(f"{path}:{number}: a fidelity example needs a prompt and a "
                                 "continuation")
            out.append(ex)
    if not out:
        raise ValueError(f"{path}: no fidelity examples (ripplekv examples --tasks fidelity)")
    return out


def exact_ratio(kept: int, length: int) -> float:
    """The compression ratio r for which kvpress keeps exactly `kept` of `length` tokens
    (kvpress.utils.compute_n_kept: int(length * (1 - r))); 1 - kept/length alone can lose one."""
    if not 1 <= kept <= length:
        raise ValueError(f"cannot keep {kept} of {length} tokens")
    ratio = 1.0 - kept / length
    while int(length * (1 - ratio)) < kept:
        ratio = math.nextafter(ratio, -math.inf)
    return ratio


def pyramid_beta(average: int, window: int) -> int:
    """The largest integer beta for which kvpress's PyramidKVPress keeps a real pyramid at an
    average of `average` tokens per layer: its smallest layer gets average / beta tokens, and
    below its window it falls back to the uniform allocation. 1 (flat) when average < 2 windows."""
    return max(1, average // window)


def stepwise_logits(model: Any, cache: DynamicCache, tokens: Sequence[int],
                    start: int) -> List[torch.Tensor]:
    """The [vocab] logits of each of `tokens` teacher-forced one at a time on `cache` at positions
    start, start + 1, ... (for one token transformers builds no attention mask, so the layers'
    caches may differ in length). Call under torch.inference_mode()."""
    return [model(torch.tensor([[token]]), past_key_values=cache,
                  position_ids=torch.tensor([[start + k]])).logits[0, -1]
            for k, token in enumerate(tokens)]


def continuation_logits(model: Any, example: Example,
                        press: Optional[BasePress]) -> Tuple[torch.Tensor, List[int]]:
    """[W, vocab] logits scoring each continuation token (row 0: the prefill's last row), with
    `press` compressing the prefill (None: the full cache), and the tokens attention sees per
    layer after the prefill (its cache length less the positions a MapPress masked, per KV head
    averaged)."""
    prompt = torch.tensor([example["prompt"]])
    forced = example["continuation"][:-1]
    cache = DynamicCache()
    with torch.inference_mode():
        if press is None:
            out = model(prompt, past_key_values=cache, use_cache=True)
        else:
            with press(model):
                out = model(prompt, past_key_values=cache, use_cache=True)
        lengths = visible_tokens(model, cache)
        rows = [out.logits[0, -1]]
        n = prompt.shape[1]
        if len({cache.layers[l].keys.shape[-2] for l in range(len(cache.layers))}) == 1:
            positions = torch.arange(n, n + len(forced)).unsqueeze(0)
            if forced:
                rows.extend(model(torch.tensor([forced]), past_key_values=cache,
                                  position_ids=positions).logits[0])
        else:
            # Layers of different lengths (kvpress's PyramidKVPress): one token at a time; a
            # block of tokens would be masked with layer 0's length and crash under sdpa.
            rows.extend(stepwise_logits(model, cache, forced, n))
    return torch.stack(rows).float(), lengths


def fidelity_scores(full: torch.Tensor, compressed: torch.Tensor,
                    continuation: Sequence[int]) -> Dict[str, float]:
    """ScoreFidelity's numbers (eval/fidelity_task.h): mean KL(full || compressed) in nats,
    top-1 agreement (argmax ties to the lowest id) and ΔNLL of the continuation."""
    log_full = torch.log_softmax(full.double(), dim=-1)
    log_comp = torch.log_softmax(compressed.double(), dim=-1)
    kl = (log_full.exp() * (log_full - log_comp)).sum(-1).clamp(min=0.0)
    target = torch.tensor(continuation).unsqueeze(-1)
    nll_full = -log_full.gather(-1, target).mean()
    nll_comp = -log_comp.gather(-1, target).mean()
    top1 = (full.argmax(-1) == compressed.argmax(-1)).double().mean()
    return {"fidelity/kl": float(kl.mean()), "fidelity/top1": float(top1),
            "fidelity/delta_nll": float(nll_comp - nll_full)}


def record_lines(method: str, budget: int, example: Example,
                 scores: Dict[str, float]) -> List[str]:
    """The records of one scored window, in eval's records format (eval/records.h)."""
    lines = []
    for task, score in scores.items():
        line: Dict[str, Any] = {"budget": budget, "example": example["id"], "method": method,
                                "score": score, "task": task}
        for key in ("corpus_tokens", "region", "split"):
            if key in example:
                line[key] = example[key]
        lines.append(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
    return lines


MethodFactory = Callable[[int, int], BasePress]  # (average budget, prompt length) -> press


def methods_for(maps: Dict[str, str], window: int) -> Dict[str, MethodFactory]:
    """kvpress's uniform SnapKV and PyramidKV, and each RippleKV map file template."""
    def uniform(budget: int, length: int) -> BasePress:
        return SnapKVPress(compression_ratio=exact_ratio(budget, length), window_size=window)

    def pyramid(budget: int, length: int) -> BasePress:
        return PyramidKVPress(compression_ratio=exact_ratio(budget, length), window_size=window,
                              beta=pyramid_beta(budget, window))

    presses: Dict[Tuple[str, int], BasePress] = {}  # (template, budget): each file read once

    def from_map(template: str, budget: int, length: int) -> BasePress:
        if (template, budget) not in presses:
            presses[template, budget] = press_from_map(template.replace("{budget}", str(budget)),
                                                       selector="snapkv", window=window)
        return presses[template, budget]

    out: Dict[str, MethodFactory] = {"snapkv": uniform, "pyramidkv": pyramid}
    for name, template in maps.items():
        out[name] = functools.partial(from_map, template)
    return out


def compare(model: Any, examples: Iterable[Example], budgets: Sequence[int],
            methods: Dict[str, MethodFactory],
            progress: Callable[[str], None] = lambda s: None) -> Tuple[List[str], Dict]:
    """Record lines for every example x budget x method, and the tokens attention sees after
    each prefill, summed over layers, per (method, budget) (matched memory)."""
    lines: List[str] = []
    kept: Dict[Tuple[str, int], List[int]] = {}
    for i, ex in enumerate(examples):
        start = time.monotonic()
        full, _ = continuation_logits(model, ex, None)
        for budget in budgets:
            for name, make in methods.items():
                logits, lengths = continuation_logits(model, ex, make(budget, len(ex["prompt"])))
                kept.setdefault((name, budget), []).append(sum(lengths))
                lines += record_lines(name, budget, ex,
                                      fidelity_scores(full, logits, ex["continuation"]))
        progress(f"{ex['id']}: {time.monotonic() - start:.1f} s ({i + 1} windows)")
    return lines, kept


def load_model(gguf: str, threads: int) -> Any:
    """SmolLM2 (or any GGUF transformers reads) in fp32 with sdpa attention."""
    torch.set_num_threads(threads)
    path = Path(gguf)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 dtype=torch.float32, attn_implementation="sdpa")
    return model.eval()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ripplekv.kvpress_compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="GGUF file (read by transformers)")
    p.add_argument("--examples", required=True, help="ripplekv examples --tasks fidelity output")
    p.add_argument("--budgets", required=True, help="average tokens per layer, e.g. 128,256")
    p.add_argument("--map", action="append", default=[], metavar="NAME=FILE",
                   help="a RippleKV map per budget ({budget} in FILE is replaced)")
    p.add_argument("--window", type=int, default=KVPRESS_SNAPKV_WINDOW,
                   help="SnapKV's window for every method (kvpress's default 64)")
    p.add_argument("--records-out", required=True)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    maps = {}
    for spec in args.map:
        name, sep, template = spec.partition("=")
        if not sep or not name or not template:
            p.error(f"--map {spec!r}: expected NAME=FILE")
        maps[name] = template
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    examples = read_examples(args.examples)
    model = load_model(args.model, args.threads)
    lines, kept = compare(model, examples, budgets, methods_for(maps, args.window),
                          progress=lambda s: print(s, file=sys.stderr, flush=True))
    Path(args.records_out).write_text("".join(lines), encoding="utf-8")
    for (name, budget), totals in sorted(kept.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{name} at {budget}: {min(totals)}..{max(totals)} tokens over the layers after "
              f"the prefill, {len(totals)} windows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
