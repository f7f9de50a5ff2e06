"""TLS and bearer tokens as the CLI configures them (docs/SECURITY.md): a token-checking
scheduler on loopback, and a TLS (mTLS) scheduler with throwaway certificates from
deploy/local/make-tls (skipped, saying so, when openssl is missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import ripplekv
from harness import SOURCE_DIR, Cluster


def make_tls(directory: Path) -> None:
    """deploy/local/make-tls into `directory`; skips the test without openssl."""
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("openssl is not installed (scripts/deps installs it)")
    subprocess.run([str(SOURCE_DIR / "deploy" / "local" / "make-tls"), str(directory)],
                   check=True, capture_output=True, timeout=60)


class TokenTest(unittest.TestCase):
    """A plaintext loopback scheduler that checks tokens."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="ripplekv_python_tls_")
        cls.tls = Path(cls.tmp.name) / "tls"
        make_tls(cls.tls)
        cls.cluster = Cluster(["--token-file", str(cls.tls / "tokens")])
        try:
            with ripplekv.Client(cls.cluster.address, token_file=cls.tls / "token-reader") as c:
                cls.cluster.await_serving(c)
        except BaseException:
            cls.cluster.close()
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()
        cls.tmp.cleanup()

    def test_a_missing_or_unknown_token_is_unauthenticated(self) -> None:
        with ripplekv.Client(self.cluster.address) as anonymous:
            with self.assertRaises(ripplekv.Unauthenticated) as caught:
                anonymous.list_jobs()
        self.assertTrue(caught.exception.message)
        wrong = Path(self.tmp.name) / "wrong-token"
        wrong.write_text("0" * 64 + "\n")
        os.chmod(wrong, 0o600)
        with ripplekv.Client(self.cluster.address, token_file=wrong) as stranger:
            with self.assertRaises(ripplekv.Unauthenticated):
                stranger.list_profiles()

    def test_a_role_that_may_not_call_is_permission_denied(self) -> None:
        with ripplekv.Client(self.cluster.address, token_file=self.tls / "token-reader") as reader:
            self.assertEqual(reader.list_jobs(), [])
            with self.assertRaises(ripplekv.PermissionDenied) as caught:
                reader.submit("ab" * 32, n_layers=2, samples=1)
        self.assertIn("reader", caught.exception.message)
        with ripplekv.Client(self.cluster.address,
                             token_file=self.tls / "token-submitter") as submitter:
            job = submitter.submit("ab" * 32, n_layers=2, samples=1)
            self.assertEqual(job.state, "PENDING")
            with self.assertRaises(ripplekv.PermissionDenied):
                submitter.start_rollout("ab" * 32, "0123456789abcdef")

    def test_an_empty_token_file_is_refused_before_any_call(self) -> None:
        empty = Path(self.tmp.name) / "empty-token"
        empty.write_text("\n")
        os.chmod(empty, 0o600)
        with self.assertRaises(ripplekv.InvalidArgument):
            ripplekv.Client(self.cluster.address, token_file=empty)
        with self.assertRaises(ripplekv.NotFound):
            ripplekv.Client(self.cluster.address, token_file=Path(self.tmp.name) / "absent")


class TlsTest(unittest.TestCase):
    """A TLS scheduler that requires client certificates (mTLS) and tokens."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="ripplekv_python_tls_")
        cls.tls = tls = Path(cls.tmp.name) / "tls"
        make_tls(tls)
        cls.cluster = Cluster(
            ["--tls-cert", str(tls / "server.pem"), "--tls-key", str(tls / "server.key"),
             "--tls-client-ca", str(tls / "ca.pem"), "--token-file", str(tls / "tokens")],
            insecure=False)
        try:
            with cls.client() as c:
                cls.cluster.await_serving(c)
        except BaseException:
            cls.cluster.close()
            cls.tmp.cleanup()
            raise

    @classmethod
    def client(cls, **overrides: object) -> ripplekv.Client:
        kwargs = dict(tls_ca=cls.tls / "ca.pem", tls_cert=cls.tls / "client.pem",
                      tls_key=cls.tls / "client.key", token_file=cls.tls / "token-reader")
        kwargs.update(overrides)
        return ripplekv.Client(cls.cluster.address, timeout=5, **kwargs)  # type: ignore[arg-type]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()
        cls.tmp.cleanup()

    def test_a_client_with_the_ca_certificate_and_token_is_served(self) -> None:
        with self.client() as c:
            self.assertEqual(c.list_profiles(), [])
        # The name checked in the server's certificate may be given explicitly.
        with self.client(tls_server_name="localhost") as c:
            self.assertEqual(c.list_jobs(), [])

    def test_a_plaintext_client_is_unavailable_with_the_tls_hint(self) -> None:
        with ripplekv.Client(self.cluster.address, timeout=5) as plain:
            with self.assertRaises(ripplekv.Unavailable) as caught:
                plain.list_jobs()
        self.assertIn("tls_ca", caught.exception.message)

    def test_a_client_without_a_certificate_cannot_connect(self) -> None:
        with self.client(tls_cert=None, tls_key=None) as no_cert:
            with self.assertRaises(ripplekv.Unavailable):
                no_cert.list_jobs()

    def test_tls_options_are_checked_as_the_cli_checks_them(self) -> None:
        with self.assertRaises(ripplekv.InvalidArgument):
            ripplekv.Client(self.cluster.address, tls_ca=self.tls / "ca.pem",
                            tls_cert=self.tls / "client.pem")
        with self.assertRaises(ripplekv.InvalidArgument):
            ripplekv.Client(self.cluster.address, tls_cert=self.tls / "client.pem",
                            tls_key=self.tls / "client.key")


if __name__ == "__main__":
    unittest.main()
