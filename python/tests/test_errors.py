"""Errors: each server status reaches the caller as its RippleKVError subclass, with the code and
the server's message (docs/ERRORS.md). Needs only a scheduler (no worker, no model)."""

from __future__ import annotations

import unittest

import grpc

import ripplekv
import ripplekv.errors
from harness import free_port, serving_cluster

UNKNOWN_HASH = "ab" * 32


class ErrorMappingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster, cls.client = serving_cluster()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.cluster.close()

    def test_an_unknown_model_hash_is_not_found(self) -> None:
        with self.assertRaises(ripplekv.NotFound) as caught:
            self.client.get_profile(UNKNOWN_HASH)
        e = caught.exception
        self.assertIsInstance(e, ripplekv.RippleKVError)
        self.assertEqual(e.code, grpc.StatusCode.NOT_FOUND)
        self.assertIn(UNKNOWN_HASH, e.message)
        self.assertFalse(e.retryable)
        with self.assertRaises(ripplekv.NotFound):
            self.client.budget_map(UNKNOWN_HASH, ripplekv.BudgetParams(average_tokens=64))
        with self.assertRaises(ripplekv.NotFound):
            self.client.get_map_version(UNKNOWN_HASH, "latest")

    def test_unknown_ids_are_not_found(self) -> None:
        with self.assertRaises(ripplekv.NotFound):
            self.client.get_job("999999")
        with self.assertRaises(ripplekv.InvalidArgument):
            self.client.get_job("no-such-job")  # job ids are decimal
        with self.assertRaises(ripplekv.NotFound):
            self.client.rollout_status("r999")
        with self.assertRaises(ripplekv.NotFound):
            self.client.start_rollout(UNKNOWN_HASH, "0123456789abcdef", stages=[1, "100%"])

    def test_bad_parameters_are_invalid_argument_naming_the_field(self) -> None:
        with self.assertRaises(ripplekv.InvalidArgument) as caught:
            self.client.get_profile("not-a-hash")
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(caught.exception.message)
        # probe_len must be below context_len: the server names the field.
        with self.assertRaises(ripplekv.InvalidArgument) as caught:
            self.client.submit(UNKNOWN_HASH, n_layers=2, samples=1, context_len=8, probe_len=8)
        self.assertIn("probe_len", caught.exception.message)
        # InvalidArgument is also a ValueError, for callers that catch those.
        with self.assertRaises(ValueError):
            self.client.submit(UNKNOWN_HASH, n_layers=2, samples=0)
        # Parameters checked here, before any call, raise the same class.
        with self.assertRaises(ripplekv.InvalidArgument):
            self.client.submit(UNKNOWN_HASH, builtin="mixed", text="both")
        with self.assertRaises(ripplekv.InvalidArgument):
            ripplekv.BudgetParams(average_tokens=64, format="yaml").to_proto()
        with self.assertRaises(ripplekv.InvalidArgument):
            ripplekv.BudgetParams().to_proto()

    def test_an_idempotency_key_reused_with_another_spec_already_exists(self) -> None:
        first = self.client.submit(UNKNOWN_HASH, n_layers=2, samples=1, idempotency_key="k-1")
        again = self.client.submit(UNKNOWN_HASH, n_layers=2, samples=1, idempotency_key="k-1")
        self.assertEqual(first.job_id, again.job_id)
        with self.assertRaises(ripplekv.AlreadyExists):
            self.client.submit(UNKNOWN_HASH, n_layers=2, samples=2, idempotency_key="k-1")
        # A cancelled job is terminal: cancelling is a no-op, and wait() raises JobFailed.
        cancelled = self.client.cancel(first.job_id)
        self.assertEqual(cancelled.state, "CANCELLED")
        with self.assertRaises(ripplekv.JobFailed) as caught:
            self.client.wait(first.job_id, progress=False, timeout=30)
        self.assertEqual(caught.exception.job.state, "CANCELLED")

    def test_nothing_listening_is_unavailable_and_retryable(self) -> None:
        with ripplekv.Client(f"127.0.0.1:{free_port()}", timeout=2) as nobody:
            with self.assertRaises(ripplekv.Unavailable) as caught:
                nobody.list_jobs()
        self.assertTrue(caught.exception.retryable)
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_every_code_has_its_class(self) -> None:
        for code in grpc.StatusCode:
            if code == grpc.StatusCode.OK:
                continue
            cls = ripplekv.errors.error_class(code)
            self.assertTrue(issubclass(cls, ripplekv.RippleKVError), code)
            self.assertEqual(cls(code, "m").code, code)
        self.assertIs(ripplekv.errors.error_class(grpc.StatusCode.PERMISSION_DENIED),
                      ripplekv.PermissionDenied)
        self.assertIs(ripplekv.errors.error_class(grpc.StatusCode.UNAUTHENTICATED),
                      ripplekv.Unauthenticated)


if __name__ == "__main__":
    unittest.main()
