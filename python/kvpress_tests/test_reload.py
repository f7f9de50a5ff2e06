"""A running kvpress process takes a new map through the agent's apply hook.

docs/examples/kvpress_server.py (SmolLM2, kvpress's pipeline, a MapPress and a ReloadServer) is
started as its own process; the hook runs as ripplekv-agent runs it (`/bin/sh -c CMD` with
RIPPLEKV_MAP_FILE and RIPPLEKV_MAP_VERSION, docs/ROLLOUTS.md). After a good map the process's
next answer keeps that map's tokens per layer; a map below SnapKV's window is refused (exit 1,
the reason on the hook's last stderr line) and the previous map stays; a removal (empty version)
returns the process to the full cache.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List

from shared import GGUF, SOURCE_DIR, budgets, fidelity_windows, model_and_tokenizer

CONTEXT = 512


class ReloadTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.map_file = self.dir / "map.json"
        self.socket = str(self.dir / "reload.sock")
        _, tokenizer = model_and_tokenizer()
        self.context = tokenizer.decode(fidelity_windows(1, CONTEXT, 8)[0]["prompt"])
        self.server = subprocess.Popen(
            [sys.executable, str(SOURCE_DIR / "docs" / "examples" / "kvpress_server.py"),
             "--model", str(GGUF), "--map", str(self.map_file), "--socket", self.socket],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"})
        ready = json.loads(self.server.stdout.readline() or "{}")
        self.assertTrue(ready.get("ready"), "kvpress_server.py did not start")

    def tearDown(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)
        self.server.stdout.close()
        self.tmp.cleanup()

    def ask(self) -> Dict[str, Any]:
        request = {"context": self.context, "question": "Who speaks?", "max_new_tokens": 4}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        return json.loads(self.server.stdout.readline())

    def hook(self, version: str, native: Dict[str, Any] = None) -> subprocess.CompletedProcess:
        """Writes the map as the agent does, then runs the apply hook as the agent runs it."""
        if native is not None:
            tmp = self.map_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(native))
            os.replace(tmp, self.map_file)
        elif self.map_file.exists():
            self.map_file.unlink()
        command = f"{shlex.quote(sys.executable)} -m ripplekv.reload --socket {self.socket}"
        env = {**os.environ, "RIPPLEKV_MAP_FILE": str(self.map_file),
               "RIPPLEKV_MAP_VERSION": version}
        return subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True,
                              text=True, timeout=60, check=False)

    @staticmethod
    def tokens(native: Dict[str, Any]) -> List[int]:
        return [layer["tokens"] for layer in native["layers"]]

    def test_the_apply_hook_swaps_the_map_of_a_running_process(self) -> None:
        full = self.ask()  # no map yet: the full cache (the context in the chat template)
        self.assertEqual(len(set(full["kept"])), 1)
        self.assertGreaterEqual(full["kept"][0], CONTEXT)
        self.assertEqual(full["map_version"], "")

        first = budgets("--avg-budget", "128", "--ratio", "4", "--selection", "snapkv",
                        "--window", "64", "--context-len", str(CONTEXT))
        done = self.hook("00000000000000a1", first)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("3840 tokens over 30 layers", done.stderr)
        answer = self.ask()
        self.assertEqual(answer["kept"], self.tokens(first))
        self.assertEqual(answer["map_version"], "00000000000000a1")

        # Below SnapKV's window of 64: refused, and the first map stays in use.
        below = budgets("--avg-budget", "96", "--ratio", "8", "--context-len", str(CONTEXT))
        refused = self.hook("00000000000000b2", below)
        self.assertEqual(refused.returncode, 1)
        self.assertRegex(refused.stderr.strip().splitlines()[-1], r"below the selector's floor "
                         r"of 64 tokens: layer \d+ \(\d+\)")
        answer = self.ask()
        self.assertEqual(answer["kept"], self.tokens(first))
        self.assertEqual(answer["map_version"], "00000000000000a1")

        second = budgets("--avg-budget", "256", "--ratio", "2", "--selection", "snapkv",
                         "--window", "64", "--context-len", str(CONTEXT))
        self.assertEqual(self.hook("00000000000000c3", second).returncode, 0)
        self.assertEqual(self.ask()["kept"], self.tokens(second))

        removed = self.hook("")
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertIn("no map", removed.stderr)
        self.assertEqual(self.ask()["kept"], full["kept"])


class NoProcessTest(unittest.TestCase):
    def test_a_hook_without_a_process_fails_saying_so(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "ripplekv.reload", "--socket", f"{tmp}/none.sock"],
                env={**os.environ, "RIPPLEKV_MAP_FILE": f"{tmp}/map.json",
                     "RIPPLEKV_MAP_VERSION": "00000000000000d4"},
                capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(done.returncode, 1)
        self.assertIn(f"no serving process answers on {tmp}/none.sock", done.stderr)


if __name__ == "__main__":
    unittest.main()
