#!/usr/bin/env python3
"""Every binary's --version: exit 0, the documented lines, and library versions that agree with
an independent source (pkg-config's record of the installed development packages).

Usage: version_test.py PROJECT_VERSION BUILD_TYPE CLI SCHEDULER WORKER AGENT
"""

import re
import subprocess
import sys


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def pkg_version(module):
    out = subprocess.run(["pkg-config", "--modversion", module], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def main():
    version, build_type, cli, scheduler, worker, agent = sys.argv[1:7]
    expected = {"grpc": pkg_version("grpc++"), "rocksdb": pkg_version("rocksdb"),
                "openblas": pkg_version("openblas")}
    binaries = {"ripplekv": (cli, ["grpc", "openblas"]),
                "ripplekv-scheduler": (scheduler, ["grpc", "rocksdb"]),
                "ripplekv-worker": (worker, ["grpc", "openblas"]),
                "ripplekv-agent": (agent, ["grpc"])}
    for name, (path, libraries) in binaries.items():
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        if run.returncode != 0:
            fail(f"{name} --version exited {run.returncode}: {run.stderr}")
        lines = run.stdout.strip("\n").split("\n")
        if lines[0] != f"{name} {version}":
            fail(f"{name}: first line {lines[0]!r}, expected {name + ' ' + version!r}")
        build = re.fullmatch(r"revision ([0-9a-f]{12}(-dirty)?|unknown), (\S+) build, "
                             r"CUDA (on|off), MPI (on|off)", lines[1])
        if not build:
            fail(f"{name}: second line {lines[1]!r}")
        if build.group(3) != build_type:
            fail(f"{name}: build type {build.group(3)}, expected {build_type}")
        got = dict(line.split(" ", 1) for line in lines[2:])
        if sorted(got) != sorted(libraries):
            fail(f"{name}: libraries {sorted(got)}, expected {sorted(libraries)}")
        for library in libraries:
            want = expected[library]
            # OpenBLAS adds its configuration after the version: "0.3.21 (DYNAMIC_ARCH ...)".
            if want is not None and got[library].split(" ")[0] != want:
                fail(f"{name}: {library} {got[library]!r}, pkg-config says {want}")
        print(f"ok {name}: {' | '.join(lines)}")


if __name__ == "__main__":
    main()
