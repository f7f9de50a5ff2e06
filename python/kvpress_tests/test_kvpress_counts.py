"""RippleKV's budget maps inside kvpress 0.5.x: every layer keeps exactly the promised tokens.

SmolLM2 is loaded by transformers from the same GGUF file the engine reads (`gguf_file=`, weights
de-quantized to fp32, sdpa attention). For each context length Lc (lengths where 1 - t/Lc is not
exact in binary), `ripplekv budgets --format kvpress` gives per-layer compression ratios; kvpress's
PerLayerCompressionPress around its SnapKVPress (window 64, as `--selection snapkv --window 64`
floors the map) prunes one prefill of exactly Lc tokens, after which layer l's cache must hold the
native map's tokens[l] entries, summing to L * B.

Environment: RIPPLEKV_CLI (the `ripplekv` binary), RIPPLEKV_SMOLLM2_GGUF (the model),
RIPPLEKV_PROFILE (a SmolLM2 profile).
"""

from __future__ import annotations

import json
import os
import subprocess
import unittest
from pathlib import Path
from typing import Any, Dict

import torch
from kvpress import PerLayerCompressionPress, SnapKVPress
from transformers import AutoModelForCausalLM

AVERAGE = 128
WINDOW = 64
CONTEXT_LENGTHS = (997, 1000, 1021)


def budgets(context_len: int, fmt: str) -> Dict[str, Any]:
    """`ripplekv budgets` of the profile at AVERAGE tokens, ratio 4, SnapKV's floor, in `fmt`."""
    result = subprocess.run(
        [os.environ["RIPPLEKV_CLI"], "budgets", "--profile", os.environ["RIPPLEKV_PROFILE"],
         "--avg-budget", str(AVERAGE), "--ratio", "4", "--selection", "snapkv", "--window",
         str(WINDOW), "--context-len", str(context_len), "--format", fmt, "--json"],
        capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise AssertionError(f"ripplekv budgets failed: {result.stderr}")
    return json.loads(result.stdout)


class KvpressCountsTest(unittest.TestCase):
    model: Any

    @classmethod
    def setUpClass(cls) -> None:
        torch.set_num_threads(1)  # beside other tests on a small machine
        gguf = Path(os.environ["RIPPLEKV_SMOLLM2_GGUF"])
        cls.model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
            attn_implementation="sdpa")
        cls.model.eval()

    def test_every_layer_keeps_the_maps_tokens_after_a_kvpress_prefill(self) -> None:
        layers = self.model.config.num_hidden_layers
        vocab = self.model.config.vocab_size
        for context_len in CONTEXT_LENGTHS:
            with self.subTest(context_len=context_len):
                native = budgets(context_len, "native")
                ratios = budgets(context_len, "kvpress")["compression_ratios"]
                promised = [layer["tokens"] for layer in native["layers"]]
                self.assertEqual(len(ratios), layers)
                self.assertEqual(sum(promised), layers * AVERAGE)
                self.assertGreaterEqual(min(promised), WINDOW)
                generator = torch.Generator().manual_seed(context_len)
                ids = torch.randint(100, vocab - 1, (1, context_len), generator=generator)
                press = PerLayerCompressionPress(SnapKVPress(window_size=WINDOW), ratios)
                with torch.no_grad(), press(self.model):
                    cache = self.model(ids, use_cache=True).past_key_values
                kept = [cache.layers[l].keys.shape[-2] for l in range(layers)]
                self.assertEqual(kept, promised)
                self.assertEqual(sum(kept), layers * AVERAGE)


if __name__ == "__main__":
    unittest.main()
