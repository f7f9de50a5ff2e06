#!/usr/bin/env python3
"""A serving node of RippleKV's budget rollouts without ripplekv-agent (docs/ROLLOUTS.md).

It keeps one WatchBudgets stream, writes each map it is assigned as TensorRT-LLM's
max_attention_window list (atomically: temporary file, fsync, rename), and acknowledges it with
ReportBudget. Generate the stubs first, from the repository root:

    python3 -m grpc_tools.protoc -I proto --python_out=OUT --grpc_python_out=OUT \
        proto/ripplekv/v1/calibration.proto proto/ripplekv/v1/rollout.proto

then run with PYTHONPATH=OUT:

    python3 docs/examples/rollout_node.py --scheduler 127.0.0.1:50051 --node-id node-7 \
        --model-hash 7c5e... --out /etc/serving/budgets.json [--token-file FILE --ca FILE]
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time

import grpc

from ripplekv.v1 import rollout_pb2, rollout_pb2_grpc


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".budgets.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def apply(assignment, out):
    """Makes `out` hold the assignment; returns (ok, error)."""
    if not assignment.version:  # no map: remove it
        if os.path.exists(out):
            os.remove(out)
        return True, ""
    document = json.loads(assignment.map.document)  # the frozen map (method/frozen_map.h)
    tokens = [layer["tokens"] for layer in document["map"]["layers"]]
    if list(tokens) != list(assignment.map.tokens):
        return False, "document and tokens disagree"
    write_atomically(out, json.dumps({"max_attention_window": tokens}) + "\n")
    return True, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--model-hash", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ca", help="PEM CA of the scheduler's certificate (TLS)")
    parser.add_argument("--token-file", help="file holding this node's agent:NODE_ID token")
    parser.add_argument("--max-assignments", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args()

    if args.ca:
        with open(args.ca, "rb") as f:
            channel = grpc.secure_channel(args.scheduler, grpc.ssl_channel_credentials(f.read()))
    else:
        channel = grpc.insecure_channel(args.scheduler)
    metadata = []
    if args.token_file:
        with open(args.token_file) as f:
            metadata.append(("authorization", "Bearer " + f.read().strip()))
    stub = rollout_pb2_grpc.RolloutServiceStub(channel)

    held, handled, backoff = "", 0, 0.1
    while True:
        request = rollout_pb2.WatchBudgetsRequest(
            node_id=args.node_id, model_hash=args.model_hash, held_version=held)
        try:
            for assignment in stub.WatchBudgets(request, metadata=metadata):
                backoff = 0.1
                if assignment.version == held:
                    ok, error = True, ""  # holds it already: acknowledge again
                else:
                    ok, error = apply(assignment, args.out)
                stub.ReportBudget(
                    rollout_pb2.ReportBudgetRequest(
                        node_id=args.node_id, model_hash=args.model_hash,
                        version=assignment.version, ok=ok, error=error),
                    metadata=metadata, timeout=10)
                if ok:
                    held = assignment.version
                print(f"{args.node_id}: {assignment.version or '(no map)'} "
                      f"{'applied' if ok else 'failed: ' + error}", flush=True)
                handled += 1
                if args.max_assignments and handled >= args.max_assignments:
                    return 0
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                            grpc.StatusCode.INVALID_ARGUMENT):
                print(f"{args.node_id}: {e.code().name}: {e.details()}", file=sys.stderr)
                return 2
        time.sleep(random.uniform(0, backoff))  # full jitter
        backoff = min(backoff * 2, 5.0)


if __name__ == "__main__":
    sys.exit(main())
