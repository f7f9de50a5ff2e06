"""RippleKV's budget maps inside kvpress 0.5.x: every layer keeps exactly the promised tokens.

SmolLM2 is loaded by transformers from the same GGUF file the engine reads (`gguf_file=`, weights
de-quantized to fp32, sdpa attention). For each context length Lc (lengths where 1 - t/Lc is not
exact in binary), `ripplekv budgets --format kvpress` gives per-layer compression ratios; kvpress's
PerLayerCompressionPress around its SnapKVPress (window 64, as `--selection snapkv --window 64`
floors the map) prunes one prefill of exactly Lc tokens, after which layer l's cache must hold the
native map's tokens[l] entries, summing to L * B.

Environment: shared.py's.
"""

from __future__ import annotations

import unittest
from typing import Any, Dict

import torch
from kvpress import PerLayerCompressionPress, SnapKVPress

from shared import budgets as ripplekv_budgets
from shared import model_and_tokenizer

AVERAGE = 128
WINDOW = 64
CONTEXT_LENGTHS = (997, 1000, 1021)


def budgets(context_len: int, fmt: str) -> Dict[str, Any]:
    """`ripplekv budgets` of the profile at AVERAGE tokens, ratio 4, SnapKV's floor, in `fmt`."""
    return ripplekv_budgets("--avg-budget", str(AVERAGE), "--ratio", "4", "--selection", "snapkv",
                            "--window", str(WINDOW), "--context-len", str(context_len),
                            "--format", fmt)


class KvpressCountsTest(unittest.TestCase):
    model: Any

    @classmethod
    def setUpClass(cls) -> None:
        cls.model, _ = model_and_tokenizer()

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
