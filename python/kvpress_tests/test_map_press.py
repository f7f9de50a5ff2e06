"""ripplekv.kvpress.MapPress on SmolLM2 under sdpa (the attention transformers uses on CPU).

- kvpress's own pipeline runs a per-layer RippleKV map, where kvpress's PerLayerCompressionPress
  crashes, and attention sees exactly the map's tokens in every layer;
- masking (every layer cut to the map's largest budget, the rest masked) gives the logits of
  evicting each layer to its own budget, the reference flash attention would run;
- a uniform map gives kvpress's SnapKVPress exactly (the same scores, the same tokens);
- a per-head map keeps each KV head's own budget;
- the selector's floor is refused or raised as stated.
"""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path
from typing import Any, List

import torch
from kvpress import PerLayerCompressionPress, SnapKVPress
from transformers import DynamicCache, pipeline

from ripplekv.kvpress import MapPress, press_from_map, visible_tokens
from ripplekv.kvpress_compare import continuation_logits, exact_ratio, stepwise_logits
from ripplekv.maps import MapError
from shared import SOURCE_DIR, budgets, fidelity_windows, model_and_tokenizer

AVERAGE = 128
WINDOW = 64
CONTEXT = 1024


class EvictEachLayer(MapPress):
    """MapPress cutting every layer to its own budget (what it does under flash attention),
    allowed here under sdpa because the continuation is decoded one token at a time."""

    def post_init_from_model(self, model: Any) -> None:
        super().post_init_from_model(model)
        self._evict = True


def stepwise_continuation_logits(model: Any, example: dict, press: MapPress) -> torch.Tensor:
    """The continuation's logits decoded one token at a time (no attention mask is built)."""
    prompt = torch.tensor([example["prompt"]])
    cache = DynamicCache()
    with torch.inference_mode():
        with press(model):
            rows = [model(prompt, past_key_values=cache, use_cache=True).logits[0, -1]]
        rows.extend(stepwise_logits(model, cache, example["continuation"][:-1], prompt.shape[1]))
    return torch.stack(rows)


class MapPressTest(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory
    map_file: Path
    tokens: List[int]

    @classmethod
    def setUpClass(cls) -> None:
        cls.model, cls.tokenizer = model_and_tokenizer()
        cls.tmp = tempfile.TemporaryDirectory()
        native = budgets("--avg-budget", str(AVERAGE), "--ratio", "4", "--selection", "snapkv",
                         "--window", str(WINDOW), "--context-len", str(CONTEXT))
        cls.map_file = Path(cls.tmp.name) / "map.json"
        cls.map_file.write_text(json.dumps(native))
        cls.tokens = [layer["tokens"] for layer in native["layers"]]
        cls.window = fidelity_windows(1, CONTEXT, 16)[0]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def test_kvpress_pipeline_runs_a_per_layer_map_under_sdpa(self) -> None:
        self.assertGreater(len(set(self.tokens)), 1)  # a real per-layer map
        context = self.tokenizer.decode(self.window["prompt"])
        pipe = pipeline("kv-press-text-generation", model=self.model, tokenizer=self.tokenizer)
        cache = DynamicCache()
        with torch.inference_mode():
            answer = pipe(context, question="Who is speaking?", press=press_from_map(self.map_file),
                          cache=cache, max_new_tokens=8)["answer"]
        self.assertTrue(answer.strip())
        self.assertEqual(visible_tokens(self.model, cache), self.tokens)
        self.assertEqual(sum(visible_tokens(self.model, cache)), 30 * AVERAGE)
        # What the map replaces: kvpress's per-layer wrapper, same budgets, crashes under sdpa.
        context_len = len(self.tokenizer(context)["input_ids"])
        ratios = [exact_ratio(t, context_len) for t in self.tokens]
        per_layer = PerLayerCompressionPress(SnapKVPress(window_size=WINDOW), ratios)
        with torch.inference_mode(), self.assertRaisesRegex(RuntimeError, "must match"):
            pipe(context, question="Who is speaking?", press=per_layer, max_new_tokens=2)

    def test_masking_gives_the_logits_of_evicting_each_layer_to_its_budget(self) -> None:
        masked_press = press_from_map(self.map_file)
        masked, kept = continuation_logits(self.model, self.window, masked_press)
        self.assertEqual(kept, self.tokens)
        evicted = stepwise_continuation_logits(self.model, self.window, EvictEachLayer(
            budgets=masked_press.budgets, scorer=SnapKVPress(window_size=WINDOW), floor=WINDOW))
        self.assertLess(float((masked - evicted).abs().max()), 2e-3)
        self.assertTrue(torch.equal(masked.argmax(-1), evicted.argmax(-1)))
        # And the map matters: full-cache logits are far from both.
        full, _ = continuation_logits(self.model, self.window, None)
        self.assertGreater(float((full - masked).abs().max()), 0.1)

    def test_a_uniform_map_is_kvpress_snapkv(self) -> None:
        uniform = {"layers": [{"layer": l, "tokens": AVERAGE} for l in range(30)]}
        ours, kept = continuation_logits(self.model, self.window,
                                         press_from_map(uniform, window=WINDOW))
        length = len(self.window["prompt"])
        theirs, their_kept = continuation_logits(
            self.model, self.window,
            SnapKVPress(compression_ratio=exact_ratio(AVERAGE, length), window_size=WINDOW))
        self.assertEqual(kept, [AVERAGE] * 30)
        self.assertEqual(their_kept, kept)
        self.assertLess(float((ours - theirs).abs().max()), 1e-4)

    def test_a_per_head_map_keeps_every_heads_budget(self) -> None:
        profile = str(SOURCE_DIR / "docs" / "results" / "profile-response-snapkv-heads.json")
        native = budgets("--avg-budget", str(AVERAGE), "--per-head", "--selection", "snapkv",
                         "--window", str(WINDOW), "--context-len", str(CONTEXT), profile=profile)
        heads = [layer["head_tokens"] for layer in native["layers"]]
        self.assertGreater(len({t for layer in heads for t in layer}), 1)
        press = press_from_map(native)
        cache = DynamicCache()
        with torch.inference_mode(), press(self.model):
            self.model(torch.tensor([self.window["prompt"]]), past_key_values=cache)
        longest = max(t for layer in heads for t in layer)
        for l, layer in enumerate(self.model.model.layers):
            self.assertEqual(cache.layers[l].keys.shape[-2], longest)
            masked = layer.self_attn.masked_key_indices
            hidden = [0] * 3 if masked is None else torch.bincount(masked[1], minlength=3).tolist()
            self.assertEqual([longest - h for h in hidden], heads[l], f"layer {l}")
        self.assertEqual(sum(sum(layer) for layer in heads), 3 * 30 * AVERAGE)
        logits, _ = continuation_logits(self.model, self.window, press)
        self.assertTrue(torch.isfinite(logits).all())

    def test_the_selectors_floor_is_refused_or_raised(self) -> None:
        native = budgets("--avg-budget", "96", "--ratio", "8", "--context-len", str(CONTEXT))
        below = [l for l, layer in enumerate(native["layers"]) if layer["tokens"] < WINDOW]
        self.assertTrue(below)
        with self.assertRaisesRegex(MapError, f"floor of {WINDOW} tokens: layer {below[0]} "):
            press_from_map(native, window=WINDOW)
        raised = press_from_map(native, window=WINDOW, floor="raise").budgets
        self.assertEqual(sum(raised.tokens), 30 * 96)
        self.assertGreaterEqual(min(raised.tokens), WINDOW)
        with self.assertRaisesRegex(MapError, "no H2O scorer"):
            press_from_map(native, selector="h2o")


if __name__ == "__main__":
    unittest.main()
