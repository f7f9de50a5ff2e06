#!/usr/bin/env python3
"""Compares a calibration's output with its golden, exactly except for floating-point rounding.

A calibration's KL values depend on the CPU the engine was built for (-march=native) and the GEMM
kernel OpenBLAS picks at run time: the same method gives values that agree to about 1e-4
relative, not to the last bit. Any change of the method (data, seed, alpha, normalization,
aggregation) moves them far more. So:
  json  MODE: the two documents must have the same structure, keys, strings, booleans and
        integers; floats must agree within a relative tolerance.
  table MODE: the two texts must have the same lines and tokens; tokens that parse as numbers
        (also inside brackets) must agree within the tolerance; bars of '#' may differ by one
        character (a value on a rounding edge).
Usage: compare_close.py json|table GOLDEN ACTUAL [--rel R]. Exit 0 when close, 1 (with the first
differences on stderr) otherwise.
"""
import argparse
import json
import math
import re
import sys

ABS = 1e-12  # absolute floor: values this close to zero are equal


def close(a, b, rel):
    return abs(a - b) <= max(ABS, rel * max(abs(a), abs(b)))


def compare_json(golden, actual, rel, path, out):
    if isinstance(golden, bool) or isinstance(actual, bool):
        if golden is not actual:
            out.append(f"{path}: {golden!r} != {actual!r}")
    elif isinstance(golden, int) and isinstance(actual, int):
        if golden != actual:
            out.append(f"{path}: {golden} != {actual}")
    elif isinstance(golden, (int, float)) and isinstance(actual, (int, float)):
        if not (math.isfinite(golden) and math.isfinite(actual) and close(golden, actual, rel)):
            out.append(f"{path}: {golden!r} vs {actual!r} (beyond relative {rel})")
    elif isinstance(golden, dict) and isinstance(actual, dict):
        if list(golden) != list(actual):
            out.append(f"{path}: keys {list(golden)} != {list(actual)}")
            return
        for key in golden:
            compare_json(golden[key], actual[key], rel, f"{path}.{key}", out)
    elif isinstance(golden, list) and isinstance(actual, list):
        if len(golden) != len(actual):
            out.append(f"{path}: {len(golden)} items != {len(actual)}")
            return
        for i, (g, a) in enumerate(zip(golden, actual)):
            compare_json(g, a, rel, f"{path}[{i}]", out)
    elif type(golden) is not type(actual) or golden != actual:
        out.append(f"{path}: {golden!r} != {actual!r}")


NUMBER = re.compile(r"^[\[(]?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[,\])]*$")


def compare_table(golden, actual, rel, out):
    g_lines, a_lines = golden.splitlines(), actual.splitlines()
    if len(g_lines) != len(a_lines):
        out.append(f"{len(g_lines)} lines != {len(a_lines)}")
        return
    for n, (g, a) in enumerate(zip(g_lines, a_lines), 1):
        # Numbers are right-aligned inside brackets ("[  0.00079,"): drop the padding.
        g_tokens = re.sub(r"\[\s+", "[", g).split()
        a_tokens = re.sub(r"\[\s+", "[", a).split()
        if len(g_tokens) != len(a_tokens):
            out.append(f"line {n}: {g!r} != {a!r}")
            continue
        for gt, at in zip(g_tokens, a_tokens):
            gm, am = NUMBER.match(gt), NUMBER.match(at)
            if gm and am:
                same_shape = gt.replace(gm.group(1), "") == at.replace(am.group(1), "")
                if not same_shape or not close(float(gm.group(1)), float(am.group(1)), rel):
                    out.append(f"line {n}: {gt} vs {at}")
            elif set(gt) == {"#"} and set(at) == {"#"}:
                if abs(len(gt) - len(at)) > 1:
                    out.append(f"line {n}: bar of {len(gt)} vs {len(at)}")
            elif gt != at:
                out.append(f"line {n}: {gt!r} != {at!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["json", "table"])
    parser.add_argument("golden")
    parser.add_argument("actual")
    parser.add_argument("--rel", type=float, default=2e-3)
    args = parser.parse_args()
    with open(args.golden, encoding="utf-8") as f:
        golden = f.read()
    with open(args.actual, encoding="utf-8") as f:
        actual = f.read()
    out = []
    if args.mode == "json":
        compare_json(json.loads(golden), json.loads(actual), args.rel, "$", out)
    else:
        compare_table(golden, actual, args.rel, out)
    for line in out[:20]:
        print(f"{args.golden}: {line}", file=sys.stderr)
    if len(out) > 20:
        print(f"{args.golden}: ... {len(out) - 20} more", file=sys.stderr)
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
