#!/usr/bin/env python3
"""A stand-in for kopt-worker in CLI tests without a GPU: speaks protocol 2
(hello, evaluate -> compiled, workload_begin/workload_result per workload,
done; shutdown -> bye), reports every subject correct with a made-up time,
and sleeps FAKE_WORKER_DELAY_S (default 0.4) per workload so that a test can
see progress arrive while the evaluation runs. Numbers are not measurements."""
import json
import os
import sys
import time

DELAY = float(os.environ.get("FAKE_WORKER_DELAY_S", "0.4"))
# A launch floor to report (hello and every timing), as the real worker
# measures one; unset: none, as from a worker that does not measure it.
FLOOR = float(os.environ.get("FAKE_WORKER_LAUNCH_FLOOR_NS", "0"))

# Compiling needs no GPU: `compile` requests go to the real worker
# (FAKE_WORKER_REAL), so compile checks pass as on any machine.
if sys.argv[1:2] == ["compile"]:
    real = os.environ.get("FAKE_WORKER_REAL", "")
    if real and os.path.exists(real):
        os.execv(real, [real] + sys.argv[1:])
    sys.stderr.write("fake worker: no compiler here\n")
    sys.exit(1)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


send({"type": "hello", "protocol": 2, "ok": True, "worker_version": "fake",
      "device": {"name": "NVIDIA H200", "uuid": "GPU-fake", "arch": "sm_90a", "sm_count": 132,
                 "compute_capability": "9.0"},
      "calibration": {"skipped": "fake worker"},
      **({"launch_floor": {"clock": "concurrent_kernel", "median_ns": FLOOR, "kernel": "empty"}} if FLOOR > 0 else {})})
for line in sys.stdin:
    req = json.loads(line)
    rid = req.get("id")
    if req.get("type") == "shutdown":
        send({"type": "bye", "id": rid})
        break
    if req.get("type") == "ping":
        send({"type": "pong", "id": rid})
        continue
    if req.get("type") != "evaluate":
        send({"type": "error", "id": rid, "message": "fake worker: unsupported request"})
        continue
    roles = [s["role"] for s in req.get("subjects", [])]
    if req.get("settings", {}).get("time_reference"):
        roles.append("reference")
    for role in ["reference"] + [r for r in roles if r != "reference"]:
        send({"type": "compiled", "id": rid, "role": role, "status": "ok", "message": "",
              "compile": {"status": "ok", "log": "", "cubin_hash": "fake", "duration_ms": 1.0,
                          "cached": True, "kernels": {}, "arch": "sm_90a"}})
    for w in req.get("workloads", []):
        send({"type": "workload_begin", "id": rid, "workload": w})
        time.sleep(DELAY)
        results = [{"role": r, "status": "ok", "message": "", "launches": [],
                    "correctness": [{"seed": 1, "passed": True, "outputs": {}}],
                    "timing": {"samples": 10, "median_ns": 1000.0, "min_ns": 990.0,
                               "max_ns": 1010.0, "mean_ns": 1000.0, "stdev_ns": 5.0,
                               "rsd": 0.005, "stop_reason": "fake",
                               **({"launch_floor_ns": FLOOR} if FLOOR > 0 else {})}}
                   for r in roles]
        send({"type": "workload_result", "id": rid, "workload": w, "results": results})
    send({"type": "done", "id": rid})
