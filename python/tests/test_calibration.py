"""The client end to end on a real scheduler and worker with the default model: submit, watch and
wait, the profile, budget maps (native and kvpress), map versions and a rollout. Skipped, saying
so, without RIPPLEKV_SMOLLM2_GGUF. The job is small: 1 sample of 32 + 8 tokens, 1 trial, every
layer (a budget map needs every layer), no verification."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unittest

import ripplekv
from harness import SOURCE_DIR, model_path, serving_cluster, wait_for


class CalibrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        model = model_path()
        cls.cluster, cls.client = serving_cluster()
        try:
            cls.cluster.start_worker("py-worker-1", model)
            cls.model_hash = ripplekv.model_hash(model)
            cls.submitted = cls.client.submit(
                model_path=model, builtin="mixed", samples=1, context_len=32, probe_len=8,
                trials=1, verify=0.0, idempotency_key="python-client-test")
            cls.progress = io.StringIO()
            cls.job = cls.client.wait(cls.submitted.job_id, progress=True, timeout=240,
                                      stream=cls.progress)
        except BaseException:
            cls.client.close()
            sys.stderr.write(cls.cluster.procs.log("scheduler") +
                             cls.cluster.procs.log("py-worker-1"))
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.cluster.close()

    def test_submit_and_wait_give_a_succeeded_job_and_a_progress_bar(self) -> None:
        self.assertEqual(self.submitted.model_hash, self.model_hash)
        self.assertEqual(self.job.state, "SUCCEEDED")
        self.assertTrue(self.job.done)
        self.assertEqual(self.job.profile_version, 1)
        self.assertEqual(self.job.progress.trials_done, self.job.progress.trials_total)
        self.assertGreater(self.job.progress.trials_total, 0)
        self.assertEqual(self.job.proto.spec.params.context_len, 32)  # everything via .proto
        bar = self.progress.getvalue()
        self.assertIn(f"job {self.job.job_id} SUCCEEDED", bar)
        self.assertIn("100.0%", bar)
        # The same key and spec name the same job.
        again = self.client.submit(
            model_path=model_path(), builtin="mixed", samples=1, context_len=32, probe_len=8,
            trials=1, verify=0.0, idempotency_key="python-client-test")
        self.assertEqual(again.job_id, self.job.job_id)
        self.assertIn(self.job.job_id, [j.job_id for j in self.client.list_jobs(self.model_hash)])

    def test_watching_a_finished_job_gives_its_snapshot_and_ends(self) -> None:
        events = list(self.client.watch(self.job.job_id, timeout=30))
        self.assertIsInstance(events[0], ripplekv.JobSnapshot)
        assert isinstance(events[0], ripplekv.JobSnapshot)
        self.assertEqual(events[0].job.state, "SUCCEEDED")

    def test_the_profile_covers_every_layer(self) -> None:
        profile = self.client.get_profile(self.model_hash)
        self.assertEqual(profile.version, 1)
        self.assertEqual(profile.job_id, self.job.job_id)
        self.assertEqual(profile.n_layers, 30)
        self.assertEqual([l.layer for l in profile.layers], list(range(30)))
        self.assertTrue(all(l.mean_kl >= 0 and l.count == 1 for l in profile.layers))
        listed = self.client.list_profiles(self.model_hash)
        self.assertEqual([(p.version, len(p.layers)) for p in listed], [(1, 0)])

    def test_budget_maps_native_and_kvpress(self) -> None:
        native = self.client.budget_map(
            self.model_hash, ripplekv.BudgetParams(average_tokens=64, ratio=4))
        self.assertEqual(native.profile_version, 1)
        self.assertEqual(len(native.tokens), 30)
        self.assertEqual(sum(native.tokens), native.total_tokens)
        self.assertEqual(native.total_tokens, 30 * 64)
        self.assertEqual(native.head_tokens, ())
        self.assertEqual([l["tokens"] for l in native.document()["layers"]], list(native.tokens))
        kvpress = self.client.budget_map(
            self.model_hash,
            ripplekv.BudgetParams(average_tokens=64, ratio=4, format="kvpress", context_len=512))
        ratios = kvpress.document()["compression_ratios"]
        self.assertEqual(len(ratios), 30)
        self.assertEqual(kvpress.tokens, native.tokens)
        self.assertEqual(kvpress.head_tokens, ())
        # kvpress needs context_len; a per-head map needs a per-head response profile.
        with self.assertRaises(ripplekv.InvalidArgument):
            self.client.budget_map(self.model_hash,
                                   ripplekv.BudgetParams(average_tokens=64, format="kvpress"))
        with self.assertRaises(ripplekv.FailedPrecondition):
            self.client.budget_map(self.model_hash,
                                   ripplekv.BudgetParams(average_tokens=64, per_head=True))

    def test_map_versions_and_a_rollout(self) -> None:
        params = ripplekv.BudgetParams(average_tokens=96, ratio=4, context_len=4096)
        created = self.client.create_map_version(
            self.model_hash, params, selection="snapkv", selection_params={"window": "32"})
        self.assertEqual(len(created.version), 16)
        self.assertFalse(created.existing)
        self.assertEqual(created.selection_params, {"window": "32"})
        again = self.client.create_map_version(
            self.model_hash, params, selection="snapkv", selection_params={"window": "32"})
        self.assertTrue(again.existing)
        self.assertEqual(again.version, created.version)
        got = self.client.get_map_version(self.model_hash, created.version)
        self.assertEqual(got.tokens, created.tokens)
        self.assertEqual(json.loads(got.document)["model_hash"], self.model_hash)
        self.assertEqual(self.client.get_map_version(self.model_hash).version, created.version)
        self.assertIn(created.version,
                      [m.version for m in self.client.list_map_versions(self.model_hash)])

        # A serving node: docs/examples/rollout_node.py with this package's stubs (no
        # PYTHONPATH) acknowledges the map.
        out = self.cluster.dir / "py-node.json"
        node = self.cluster.procs.start("py-node", [
            sys.executable, str(SOURCE_DIR / "docs" / "examples" / "rollout_node.py"),
            "--scheduler", self.cluster.address, "--node-id", "py-node",
            "--model-hash", self.model_hash, "--out", str(out)])
        rollout = self.client.start_rollout(self.model_hash, created.version, stages=["100%"])
        self.assertEqual(rollout.map_version, created.version)
        self.assertEqual(rollout.stages, ("100%",))
        with self.assertRaises(ripplekv.FailedPrecondition):
            self.client.start_rollout(self.model_hash, created.version, stages=["100%"])
        final = {}

        def succeeded() -> bool:
            final["r"] = self.client.rollout_status(rollout.rollout_id)
            return final["r"].state == "SUCCEEDED"

        wait_for(succeeded, 60, f"rollout {rollout.rollout_id} to succeed: "
                 f"{final.get('r')}\n{self.cluster.procs.log('py-node')}", period=0.2)
        self.assertIsNone(node.poll(), self.cluster.procs.log("py-node"))
        nodes = {n.node_id: n for n in final["r"].nodes}
        self.assertEqual(nodes["py-node"].held_version, created.version)
        self.assertEqual(nodes["py-node"].state, "APPLIED")
        self.assertEqual(json.loads(out.read_text())["max_attention_window"], list(created.tokens))
        # A finished rollout cannot be paused; it can be rolled back.
        with self.assertRaises(ripplekv.FailedPrecondition):
            self.client.pause_rollout(rollout.rollout_id)
        self.assertEqual(self.client.rollback_rollout(rollout.rollout_id).state, "ROLLED_BACK")
        listed = self.client.list_rollouts(self.model_hash)
        self.assertEqual([(r.rollout_id, r.state) for r in listed],
                         [(rollout.rollout_id, "ROLLED_BACK")])

        # Pause and resume on a rollout that waits for nodes that never come: the node is gone.
        node.terminate()
        node.wait(timeout=10)
        second = self.client.create_map_version(
            self.model_hash, ripplekv.BudgetParams(average_tokens=80, ratio=2))
        waiting = self.client.start_rollout(self.model_hash, second.version, stages=[5, "100%"])
        self.assertEqual(waiting.state, "RUNNING")
        paused = self.client.pause_rollout(waiting.rollout_id, reason="python test")
        self.assertEqual((paused.state, paused.pause_reason), ("PAUSED", "python test"))
        self.assertEqual(self.client.resume_rollout(waiting.rollout_id).state, "RUNNING")
        with self.assertRaises(ripplekv.FailedPrecondition):
            self.client.resume_rollout(waiting.rollout_id)


if __name__ == "__main__":
    unittest.main()
