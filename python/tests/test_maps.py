"""ripplekv.maps and ripplekv.reload without torch: reading maps in every form RippleKV hands
out, the stated floor rule (hand-computed), and the reload protocol over a real Unix socket."""

from __future__ import annotations

import json
import socket
import tempfile
import unittest
from pathlib import Path
from typing import Optional

from ripplekv import MapVersion
from ripplekv.maps import Budgets, MapError, apply_floor, load_map, recorded_window
from ripplekv.reload import ReloadFailed, ReloadServer, request_reload


def native(tokens, heads=None):
    layers = []
    for l, t in enumerate(tokens):
        layer = {"layer": l, "tokens": t, "multiplier": 1.0, "normalized": 0.0}
        if heads is not None:
            layer["head_tokens"] = heads[l]
        layers.append(layer)
    return {"schema_version": 1 if heads is None else 2, "model_hash": "ab" * 32,
            "params": {"min_tokens": 1}, "total_tokens": sum(tokens), "layers": layers}


class LoadMapTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def write(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text)
        return path

    def test_every_form_gives_the_same_budgets(self) -> None:
        doc = native([40, 100, 60, 200])
        frozen = {"schema_version": 1, "model_hash": "ab" * 32, "profile_version": 3,
                  "selection": {"method": "snapkv", "params": {"window": "64"}}, "map": doc}
        version = MapVersion(model_hash="ab" * 32, version="0123456789abcdef", sequence=1,
                             profile_version=3, total_tokens=400, tokens=(40, 100, 60, 200),
                             selection_method="snapkv", selection_params={"window": "64"},
                             document=json.dumps(frozen), create_time=None, existing=False,
                             proto=None)
        for source in (self.write("map.json", json.dumps(doc)), doc, frozen, version):
            b = load_map(source)
            self.assertEqual(b.tokens, (40, 100, 60, 200))
            self.assertEqual(b.total_tokens, 400)
            self.assertEqual(b.largest, 200)
            self.assertFalse(b.per_head)
        self.assertEqual(recorded_window(load_map(version)), 64)
        self.assertEqual(load_map(version).version, "0123456789abcdef")
        self.assertIsNone(recorded_window(load_map(doc)))

    def test_a_per_head_map_keeps_its_heads(self) -> None:
        b = load_map(native([100, 50], heads=[[150, 50], [40, 60]]))
        self.assertTrue(b.per_head)
        self.assertEqual(b.head_budgets(0, 2), (150, 50))
        self.assertEqual(b.total_tokens, 300)
        self.assertEqual(b.largest, 150)  # a head's, above every layer's mean
        with self.assertRaisesRegex(MapError, r"\[2\] heads per layer, the model 3 KV heads"):
            b.check_shape(2, 3)

    def test_malformed_maps_name_the_file_and_field(self) -> None:
        cases = {
            "not-json.json": ("{", r"not-json.json: not JSON"),
            "list.json": ("[1]", r"list.json: not a JSON object"),
            "kvpress.json": ('{"compression_ratios": [0.5]}',
                             r"kvpress export holds ratios relative to one context length"),
            "zero.json": (json.dumps(native([10, 0])), r"layers\[1\]\.tokens must be a positive"),
            "total.json": (json.dumps({**native([10, 20]), "total_tokens": 31}),
                           r"total_tokens is 31, the layers sum to 30"),
            "order.json": (json.dumps({"layers": [{"layer": 1, "tokens": 5}]}),
                           r"layers\[0\]\.layer is 1, expected 0"),
        }
        for name, (text, message) in cases.items():
            with self.subTest(name=name), self.assertRaisesRegex(MapError, message):
                load_map(self.write(name, text))
        with self.assertRaisesRegex(MapError, "missing.json: No such file"):
            load_map(self.dir / "missing.json")


class FloorTest(unittest.TestCase):
    def test_refuse_names_every_layer_below_the_floor(self) -> None:
        b = load_map(native([40, 100, 60, 200]))
        with self.assertRaisesRegex(MapError, r"2 of 4 budgets are below the selector's floor of "
                                    r"64 tokens: layer 0 \(40\), layer 2 \(60\); .*--window 64"):
            apply_floor(b, 64)
        self.assertIs(apply_floor(b, 40), b)  # at the floor: unchanged

    def test_raise_takes_the_tokens_from_the_excess_by_largest_remainder(self) -> None:
        # Raising 40 and 60 to 64 needs 28 tokens; the excesses are 36 and 136 (172 in all):
        # shares 28*36/172 = 5.86 and 28*136/172 = 22.14 -> floors 5 and 22, the last token to
        # the larger remainder (.86): 6 and 22.
        raised = apply_floor(load_map(native([40, 100, 60, 200])), 64, "raise")
        self.assertEqual(raised.tokens, (64, 94, 64, 178))
        self.assertEqual(raised.min_tokens, 64)

    def test_raise_per_head_keeps_the_total_and_the_layer_means(self) -> None:
        b = load_map(native([100, 50], heads=[[150, 50], [40, 60]]))
        raised = apply_floor(b, 64, "raise")
        # 50, 40 and 60 -> 64: 14 + 24 + 4 = 42 tokens, all from 150 (the only excess, 86).
        self.assertEqual(raised.head_tokens, ((108, 64), (64, 64)))
        self.assertEqual(raised.tokens, (86, 64))
        self.assertEqual(sum(raised.tokens), sum(b.tokens))
        self.assertEqual(raised.total_tokens, b.total_tokens)

    def test_a_total_below_every_floor_is_an_error(self) -> None:
        with self.assertRaisesRegex(MapError, "120 tokens cannot give 2 budgets the floor of 64"):
            apply_floor(load_map(native([20, 100])), 64, "raise")


class Holder:
    """What a serving process's MapPress does on update, without torch: read, floor, keep."""

    def __init__(self) -> None:
        self.held: Optional[Budgets] = None

    def update(self, source: Optional[str]) -> Optional[Budgets]:
        new = None if source is None else apply_floor(load_map(source), 64)
        self.held = new
        return new


class ReloadProtocolTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.holder = Holder()
        self.server = ReloadServer(self.holder, str(self.dir / "reload.sock"))

    def tearDown(self) -> None:
        self.server.close()
        self.tmp.cleanup()

    def test_a_good_map_is_held_and_a_bad_one_refused_with_its_reason(self) -> None:
        good = self.dir / "good.json"
        good.write_text(json.dumps(native([64, 136])))
        reply = request_reload(self.server.path, str(good), "v1")
        self.assertEqual(reply, {"ok": True, "version": "v1", "layers": 2, "total_tokens": 200})
        self.assertEqual(self.holder.held.tokens, (64, 136))
        bad = self.dir / "bad.json"
        bad.write_text(json.dumps(native([40, 160])))
        with self.assertRaisesRegex(ReloadFailed, r"below the selector's floor of 64 tokens"):
            request_reload(self.server.path, str(bad), "v2")
        self.assertEqual(self.server.version, "v1")
        self.assertEqual(request_reload(self.server.path, None)["layers"], 0)
        self.assertIsNone(self.holder.held)
        self.assertEqual(self.server.version, "")

    def test_a_malformed_request_is_answered_not_fatal(self) -> None:
        for line in (b"not json\n", b"[1]\n", b'{"map": 5}\n'):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.server.path)
                conn.sendall(line)
                reply = json.loads(conn.makefile().readline())
            self.assertFalse(reply["ok"], line)
        self.assertTrue(request_reload(self.server.path, None)["ok"])  # still serving


if __name__ == "__main__":
    unittest.main()
