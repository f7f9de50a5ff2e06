"""Build step of the ripplekv package: generates the gRPC stubs from the repository's proto/.

The stubs go into the built package as `ripplekv.v1` (`ripplekv/v1/calibration_pb2.py`, ...),
the module path protoc derives from the proto package `ripplekv.v1`, so the generated imports
(`from ripplekv.v1 import calibration_pb2`) resolve inside this package without rewriting. Nothing
generated is in the source tree.

The protos live outside python/ (in ../proto), so the build must run in the source tree: `pip
install ./python` (pip builds in-tree) or `pip install --no-build-isolation ./python`; an sdist
built elsewhere has no proto/. RIPPLEKV_PROTO_DIR overrides where the protos are looked for.
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# Everything a client may need: the services, and the messages they share (worker.proto for
# completeness; admin.proto for AdminService).
PROTOS = ("calibration", "rollout", "admin", "worker")


def proto_root() -> Path:
    """The directory holding ripplekv/v1/*.proto; raises SystemExit naming it when missing."""
    env = os.environ.get("RIPPLEKV_PROTO_DIR")
    root = Path(env) if env else Path(__file__).resolve().parent.parent / "proto"
    if not (root / "ripplekv" / "v1" / "calibration.proto").is_file():
        raise SystemExit(
            f"ripplekv: {root}/ripplekv/v1/*.proto not found; build from the repository's "
            "python/ directory (pip install ./python), or set RIPPLEKV_PROTO_DIR"
        )
    return root


class BuildPyWithStubs(build_py):
    """build_py that also runs grpc_tools.protoc into the build directory."""

    def run(self) -> None:
        super().run()
        import grpc_tools
        from grpc_tools import protoc

        root = proto_root()
        out = Path(self.build_lib)
        # The well-known types (google/protobuf/duration.proto, timestamp.proto) ship with
        # grpc_tools.
        well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
        ] + [str(root / "ripplekv" / "v1" / f"{name}.proto") for name in PROTOS]
        if protoc.main(args) != 0:
            raise SystemExit(f"ripplekv: grpc_tools.protoc failed on {root}")
        init = out / "ripplekv" / "v1" / "__init__.py"
        init.write_text('"""Generated gRPC stubs of proto/ripplekv/v1 (built by setup.py)."""\n')


setup(cmdclass={"build_py": BuildPyWithStubs})
