#!/bin/bash
# HEALTHCHECK of the worker image (deploy/docker/README.md): healthy while the worker in this
# container holds a stream to the scheduler, as its metrics endpoint says
# (`ripplekv_worker_connected 1`). The worker has no gRPC server to ask; its metrics endpoint is
# the one thing it serves, from when its model is loaded. It must run with
# --metrics-listen 0.0.0.0:PORT (or 127.0.0.1:PORT); PORT is $RIPPLEKV_METRICS_PORT, default 9100.
#
# The image has no curl: bash's /dev/tcp sends one HTTP/1.0 request. Exit 0 connected, 1 not (no
# endpoint yet, not connected, or no answer within 5 s a line); Docker reserves 2.
set -uo pipefail

port="${RIPPLEKV_METRICS_PORT:-9100}"
if ! { exec 3<>"/dev/tcp/127.0.0.1/${port}"; } 2>/dev/null; then
  echo "no metrics endpoint on 127.0.0.1:${port} (model still loading, or no --metrics-listen)"
  exit 1
fi
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
while IFS= read -r -t 5 line <&3; do
  if [[ "${line%$'\r'}" == "ripplekv_worker_connected 1" ]]; then
    echo "connected to the scheduler"
    exit 0
  fi
done
echo "not connected to the scheduler"
exit 1
