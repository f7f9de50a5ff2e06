#!/usr/bin/env python3
"""Metrics and JSON logs of a real scheduler and worker during a real calibration job.

Starts ripplekv-scheduler and ripplekv-worker on loopback with --metrics-listen and
--log-format json, submits a job on the default model, and scrapes both endpoints while it runs.
Every scrape is parsed with the Prometheus client's own parser (prometheus_client, installed by
scripts/python-packages); the test checks that counters only grow and do move, that every
histogram is consistent (cumulative buckets, +Inf = count, sum >= 0), that names follow
Prometheus' conventions, that the final counts match the job, and that every log line of both
daemons is a JSON object with the documented fields, the task lines carrying job and task ids.

Usage: metrics_e2e_test.py CLI SCHEDULER WORKER   (env: RIPPLEKV_SMOLLM2_GGUF,
RIPPLEKV_PYTHON_PROMETHEUS: the PYTHONPATH entry holding prometheus_client)
Exit 0: passed; 77: skipped (no model or no parser; ctest's SKIP_RETURN_CODE); 1: failed.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
NAME = re.compile(r"^ripplekv_[a-z0-9_]*[a-z0-9]$")
BASE_UNITS_BAD = re.compile(r"_(milliseconds|ms|microseconds|kilobytes|megabytes|mib|kib)(_|$)")
TIMEOUT_S = 120


def fail(why, logs=""):
    print(f"FAIL: {why}")
    if logs:
        print(logs)
    sys.exit(1)


def wait_for_line(path, pattern, proc, timeout_s=60):
    """The first JSON log line in `path` whose msg matches `pattern`, as (line, match)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path, encoding="utf-8", errors="replace") as f:
            for raw in f:
                try:
                    line = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                m = re.search(pattern, line.get("msg", ""))
                if m:
                    return line, m
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    with open(path, encoding="utf-8", errors="replace") as f:
        fail(f"no log line matching {pattern!r} in {path}", f.read())


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        if r.status != 200:
            fail(f"scrape of port {port}: HTTP {r.status}")
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            fail(f"scrape of port {port}: content type {ctype!r}")
        return r.read().decode("utf-8")


def parse(text):
    """{family name: (type, {(sample name, sorted labels): value})} via prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    families = {}
    for fam in text_string_to_metric_families(text):
        samples = {}
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        families[fam.name] = (fam.type, fam.documentation, samples)
    return families


def check_conventions(families, raw):
    for name, (ftype, doc, samples) in families.items():
        if not NAME.match(name):
            fail(f"metric name {name!r} breaks the naming convention")
        if BASE_UNITS_BAD.search(name):
            fail(f"metric {name!r} is not in base units")
        if not doc:
            fail(f"metric {name!r} has no HELP")
        # prometheus_client strips _total from counter family names; the exposed name keeps it.
        if ftype == "counter":
            if f"# TYPE {name}_total counter" not in raw:
                fail(f"counter {name} is not exposed as {name}_total")
        elif name.endswith("_total"):
            fail(f"{ftype} {name} ends in _total")
        if ftype == "histogram":
            check_histogram(name, samples)


def check_histogram(name, samples):
    series = {}
    for (sname, labels), v in samples.items():
        key = tuple((k, x) for k, x in labels if k != "le")
        series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sname == name + "_bucket":
            le = dict(labels)["le"]
            series[key]["buckets"].append((float(le), v))
        elif sname == name + "_sum":
            series[key]["sum"] = v
        elif sname == name + "_count":
            series[key]["count"] = v
    for key, s in series.items():
        buckets = sorted(s["buckets"])
        if not buckets or buckets[-1][0] != float("inf"):
            fail(f"histogram {name}{key}: no +Inf bucket")
        counts = [c for _, c in buckets]
        if counts != sorted(counts):
            fail(f"histogram {name}{key}: buckets not cumulative: {counts}")
        if s["count"] != counts[-1]:
            fail(f"histogram {name}{key}: count {s['count']} != +Inf bucket {counts[-1]}")
        if s["sum"] is None or s["sum"] < 0:
            fail(f"histogram {name}{key}: bad sum {s['sum']}")


def value(families, family, sample=None, **labels):
    ftype, _, samples = families[family]
    sample = sample or (family + "_total" if ftype == "counter" else family)
    return samples.get((sample, tuple(sorted(labels.items()))))


def check_monotonic(before, after):
    for name, (ftype, _, samples) in before.items():
        if ftype not in ("counter", "histogram") or name not in after:
            continue
        for key, v in samples.items():
            w = after[name][2].get(key)
            if w is not None and w < v:
                fail(f"{key} went down: {v} -> {w}")


def check_logs(path, service):
    ids_seen = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines:
        fail(f"{path}: no log lines")
    for i, raw in enumerate(lines, 1):
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as e:
            fail(f"{path}:{i}: not JSON ({e}): {raw!r}")
        for field in ("ts", "severity", "service", "msg"):
            if field not in line:
                fail(f"{path}:{i}: no {field}: {raw!r}")
        if line["service"] != service:
            fail(f"{path}:{i}: service {line['service']!r}, expected {service!r}")
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"]):
            fail(f"{path}:{i}: ts {line['ts']!r} is not RFC 3339 UTC with milliseconds")
        m = re.match(r"task (\S+) \(job (\S+),", line["msg"])
        if m:
            if line.get("task") != m.group(1) or line.get("job") != m.group(2):
                fail(f"{path}:{i}: task line without its ids: {raw!r}")
            ids_seen = True
    return ids_seen


def main():
    cli, scheduler_bin, worker_bin = sys.argv[1:4]
    model = os.environ.get("RIPPLEKV_SMOLLM2_GGUF", "")
    if not model:
        print("SKIP: RIPPLEKV_SMOLLM2_GGUF is not set (scripts/fetch-model)")
        return SKIP
    sys.path.insert(0, os.environ.get("RIPPLEKV_PYTHON_PROMETHEUS", ""))
    try:
        import prometheus_client.parser  # noqa: F401
    except ImportError:
        print("SKIP: prometheus_client is not installed (scripts/python-packages)")
        return SKIP

    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        sched_log = os.path.join(tmp, "scheduler.log")
        worker_log = os.path.join(tmp, "worker.log")
        procs = []
        try:
            sched = subprocess.Popen(
                [scheduler_bin, "--listen", "127.0.0.1:0", "--insecure", "--db",
                 os.path.join(tmp, "db"), "--metrics-listen", "127.0.0.1:0", "--log-format",
                 "json"], stdout=subprocess.DEVNULL, stderr=open(sched_log, "w"), env=env)
            procs.append(sched)
            _, m = wait_for_line(sched_log, r"serving on \S+ \(port (\d+)\)", sched)
            address = f"127.0.0.1:{m.group(1)}"
            _, m = wait_for_line(sched_log, r"metrics on \S+ \(port (\d+)\)", sched)
            sched_port = int(m.group(1))
            worker = subprocess.Popen(
                [worker_bin, "--scheduler", address, "--model", model, "--threads", "1", "--id",
                 "w1", "--metrics-listen", "127.0.0.1:0", "--log-format", "json"],
                stdout=subprocess.DEVNULL, stderr=open(worker_log, "w"), env=env)
            procs.append(worker)
            _, m = wait_for_line(worker_log, r"metrics on \S+ \(port (\d+)\)", worker)
            worker_port = int(m.group(1))
            wait_for_line(worker_log, r"registered with", worker)

            first_sched = parse(scrape(sched_port))
            first_worker = parse(scrape(worker_port))
            if value(first_sched, "ripplekv_scheduler_workers_connected") != 1:
                fail("the scheduler does not count the registered worker")
            # 2 samples x 30 layers = 60 tasks of 2 trials: several seconds on one thread. One
            # worker cannot verify another: --verify 0, so every task is leased and timed once.
            submit = subprocess.Popen(
                [cli, "submit", "--scheduler", address, "--model", model, "--wait", "--samples",
                 "2", "--context-len", "64", "--probe", "8", "--trials", "2", "--seed", "3",
                 "--verify", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
            procs.append(submit)
            scrapes = [(first_sched, first_worker)]
            deadline = time.monotonic() + TIMEOUT_S
            while submit.poll() is None:
                if time.monotonic() > deadline:
                    fail("the job did not finish in time")
                time.sleep(0.5)
                s_text, w_text = scrape(sched_port), scrape(worker_port)
                s, w = parse(s_text), parse(w_text)
                check_conventions(s, s_text)
                check_conventions(w, w_text)
                check_monotonic(scrapes[-1][0], s)
                check_monotonic(scrapes[-1][1], w)
                scrapes.append((s, w))
            out, err = submit.communicate()
            if submit.returncode != 0:
                fail(f"submit exited {submit.returncode}", out + err)
            during = [s for s, _ in scrapes[1:]
                      if value(s, "ripplekv_scheduler_jobs", state="running") == 1]
            if not during:
                fail("no scrape saw the job running")
            final_s = parse(scrape(sched_port))
            final_w = parse(scrape(worker_port))
            check_monotonic(scrapes[-1][0], final_s)
            tasks = 60
            checks = {
                ("scheduler", "ripplekv_scheduler_tasks_completed"): tasks,
                ("scheduler", "ripplekv_scheduler_tasks_leased"): tasks,
                ("worker", "ripplekv_worker_tasks_completed"): tasks,
                ("worker", "ripplekv_worker_trials"): 2 * tasks,
            }
            for (which, family), want in checks.items():
                got = value(final_s if which == "scheduler" else final_w, family)
                if got != want:
                    fail(f"{family}: {got}, expected {want}")
            for family in ("ripplekv_scheduler_quarantines", "ripplekv_scheduler_workers_quarantined",
                           "ripplekv_scheduler_verification_disagreements"):
                if value(final_s, family) != 0:
                    fail(f"{family}: {value(final_s, family)}, expected 0 (one healthy worker)")
            if value(final_s, "ripplekv_scheduler_jobs_finished", state="succeeded") != 1:
                fail("jobs_finished_total{state=succeeded} is not 1")
            latency = "ripplekv_scheduler_task_result_latency_seconds"
            if value(final_s, latency, latency + "_count") != tasks:
                fail(f"{latency}_count is not {tasks}")
            writes = "ripplekv_scheduler_store_write_latency_seconds"
            if not value(final_s, writes, writes + "_count"):
                fail(f"{writes} observed no write")
            if not value(final_s, "ripplekv_scheduler_store_size_bytes"):
                fail("store_size_bytes is 0")
            busy = value(final_w, "ripplekv_worker_busy_seconds")
            connected = value(final_w, "ripplekv_worker_connected_seconds")
            if not busy or busy <= 0:
                fail(f"busy seconds {busy}")
            # The worker drops a job's prepared samples once the job ends: look during it.
            peak_cache = max(value(w, "ripplekv_worker_prepared_cache_bytes") or 0
                             for _, w in scrapes)
            if peak_cache <= 0:
                fail("no scrape saw the prepared-sample cache hold anything")
            cache = "ripplekv_worker_prepared_cache_requests"
            misses = value(final_w, cache, result="miss") or 0
            hits = value(final_w, cache, result="hit") or 0
            if misses < 2 or hits + misses < tasks:
                fail(f"cache requests: {hits} hits, {misses} misses for {tasks} tasks of 2 samples")
            if value(final_w, "ripplekv_build_info", service="worker",
                     version=next(dict(k[1]).get("version") for k in
                                  final_w["ripplekv_build_info"][2])) != 1:
                fail("no build info")
            moved = [k for k in ("ripplekv_worker_trials", "ripplekv_worker_busy_seconds")
                     if value(scrapes[1][1], k) != value(final_w, k)]
            if not moved:
                fail("no worker counter moved during the job")
            for p in (worker, sched):
                p.send_signal(signal.SIGTERM)
                if p.wait(timeout=30) != 0:
                    fail(f"{p.args[0]} exited {p.returncode} on SIGTERM")
            if not check_logs(worker_log, "worker"):
                fail("no worker task line carried job and task ids")
            check_logs(sched_log, "scheduler")
            print(f"PASS: {len(scrapes)} scrapes during the job; {tasks} tasks; "
                  f"busy {busy:.2f} s of {connected:.2f} s connected")
            return 0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    sys.exit(main())
