"""The comparison inside kvpress (ripplekv.kvpress_compare) on two short windows.

RippleKV's map, kvpress's uniform SnapKV and its PyramidKV run on `ripplekv examples` windows at
matched memory; the records have eval's format and `ripplekv compare` reads them; PyramidKV's
beta makes a real pyramid (kvpress's default beta 20 is flat at this budget).
"""

from __future__ import annotations

import json
import subprocess
import os
import tempfile
import unittest
from pathlib import Path

import torch
from kvpress import PyramidKVPress
from transformers import DynamicCache

from ripplekv.kvpress_compare import compare, exact_ratio, methods_for, pyramid_beta
from shared import budgets, fidelity_windows, model_and_tokenizer

CONTEXT = 512
AVERAGE = 128
WINDOW = 64


class KvpressCompareTest(unittest.TestCase):
    def test_records_of_every_method_pair_in_ripplekv_compare(self) -> None:
        model, _ = model_and_tokenizer()
        windows = fidelity_windows(2, CONTEXT, 8)
        with tempfile.TemporaryDirectory() as tmp:
            native = budgets("--avg-budget", str(AVERAGE), "--ratio", "4", "--selection",
                             "snapkv", "--window", str(WINDOW), "--context-len", str(CONTEXT))
            Path(tmp, f"ripple-{AVERAGE}.json").write_text(json.dumps(native))
            methods = methods_for({"ripple+snapkv": f"{tmp}/ripple-{{budget}}.json"}, WINDOW)
            lines, kept = compare(model, windows, [AVERAGE], methods)
            self.assertEqual(len(lines), 2 * 3 * 3)  # windows x methods x (kl, top1, delta_nll)
            for line in lines:
                record = json.loads(line)
                self.assertEqual(record["split"], "test")
                if record["task"] == "fidelity/kl":
                    self.assertGreater(record["score"], 0.0)
                if record["task"] == "fidelity/top1":
                    self.assertTrue(0.0 <= record["score"] <= 1.0)
            # Matched memory: the tokens attention sees after the prefill, over the layers.
            self.assertEqual(kept[("snapkv", AVERAGE)], [30 * AVERAGE] * 2)
            self.assertEqual(kept[("ripple+snapkv", AVERAGE)], [30 * AVERAGE] * 2)
            for total in kept[("pyramidkv", AVERAGE)]:
                self.assertLessEqual(abs(total - 30 * AVERAGE), 15)  # its per-layer rounding
            records = Path(tmp, "records.jsonl")
            records.write_text("".join(lines))
            result = subprocess.run(
                [os.environ["RIPPLEKV_CLI"], "compare", str(records), "--pair",
                 "ripple+snapkv,snapkv", "--pair", "ripple+snapkv,pyramidkv", "--json"],
                capture_output=True, text=True, timeout=60, check=False)
            self.assertEqual(result.returncode, 0, result.stderr)
            rows = json.loads(result.stdout)["rows"]
            self.assertEqual(len(rows), 2 * 3)
            self.assertTrue(all(row["n"] == 2 for row in rows))

    def test_pyramid_beta_makes_a_real_pyramid(self) -> None:
        model, _ = model_and_tokenizer()
        prompt = torch.tensor([fidelity_windows(2, CONTEXT, 8)[0]["prompt"]])
        ratio = exact_ratio(AVERAGE, CONTEXT)

        def lengths(beta: int) -> list:
            cache = DynamicCache()
            press = PyramidKVPress(compression_ratio=ratio, window_size=WINDOW, beta=beta)
            with torch.inference_mode(), press(model):
                model(prompt, past_key_values=cache)
            return [layer.keys.shape[-2] for layer in cache.layers]

        self.assertEqual(pyramid_beta(AVERAGE, WINDOW), 2)
        pyramid = lengths(pyramid_beta(AVERAGE, WINDOW))
        self.assertEqual((pyramid[0], pyramid[-1]), (192, 64))
        self.assertEqual(pyramid, sorted(pyramid, reverse=True))
        self.assertEqual(lengths(20), [AVERAGE] * 30)  # kvpress's default: flat


if __name__ == "__main__":
    unittest.main()
