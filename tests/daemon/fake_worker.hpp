// A fake kopt-worker for the daemon tests (python3, the JSON-lines worker
// protocol of docs/worker-protocol.md), and a launch prefix that logs how
// it was called and execs the rest, as `srun` would. The worker:
//  - logs every start (argv) to DIR/starts.log;
//  - dies before its hello while DIR/crash_on_start exists (a worker that
//    crashes on start-up);
//  - dies without a word on every request for an operator whose name
//    contains "crashy" (a worker that crashes in a loop for one campaign);
//  - otherwise answers each subject on each workload with "ok" and
//    deterministic timings derived from the candidate's content, plus
//    made-up counters when the request asks for a tier (logged to
//    DIR/counters.log with whether it was started --profile-only).
#pragma once

#include <filesystem>
#include <string>

#include "protocol/protocol.hpp"
#include "support.hpp"

namespace kopt::test {

inline const char* fake_worker_py = R"PY(#!/usr/bin/python3
import hashlib, json, os, random, sys

DIR = "@DIR@"

def log(name, obj):
    with open(os.path.join(DIR, name), "a") as f:
        f.write(json.dumps(obj) + "\n")

def emit(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()

log("starts.log", {"argv": sys.argv[1:], "pid": os.getpid()})
if os.path.exists(os.path.join(DIR, "crash_on_start")):
    sys.stderr.write("fake worker: cannot initialise the device (crash_on_start)\n")
    sys.stderr.flush()
    sys.exit(3)
gpu = sys.argv[sys.argv.index("--gpu") + 1] if "--gpu" in sys.argv else "?"
emit({"type": "hello", "protocol": @PROTOCOL@, "ok": True,
      "device": {"name": "Fake GPU " + gpu, "arch": "sm_90a"}, "worker_version": "fake"})

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    rid = req.get("id", "")
    t = req.get("type")
    if t == "shutdown":
        emit({"type": "bye", "id": rid})
        sys.exit(0)
    if t != "evaluate":
        emit({"type": "error", "id": rid, "message": "unknown request type"})
        continue
    name = req.get("operator", {}).get("name", "")
    log("requests.log", {"operator": name, "subjects": len(req.get("subjects", [])), "gpu": gpu})
    if "crashy" in name:
        os._exit(11)
    subjects = req.get("subjects", [])
    for s in subjects:
        emit({"type": "compiled", "id": rid, "role": s["role"], "status": "ok"})
    for w in req["workloads"]:
        emit({"type": "workload_begin", "id": rid, "workload": w})
        results = []
        for s in subjects:
            h = hashlib.sha256((json.dumps(s["candidate"], sort_keys=True) + w).encode()).digest()
            base = 2000.0 + (h[0] * 256 + h[1]) % 3000
            rng = random.Random(h[2] * 65536 + h[3] * 256 + req.get("settings", {}).get("base_seed", 0) % 256)
            samples = [base * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(21)]
            srt = sorted(samples)
            r = {"role": s["role"], "status": "ok",
                 "timing": {"median_ns": srt[10], "samples_ns": samples, "samples": 21,
                            "q1_ns": srt[5], "q3_ns": srt[15], "rsd": 0.01, "stop_reason": "fake"}}
            tier = req.get("settings", {}).get("counters", "none")
            if tier != "none":
                # Only the --profile-only worker is asked for counters.
                log("counters.log", {"profile_only": "--profile-only" in sys.argv, "tier": tier, "gpu": gpu})
                r["counters"] = {"mode": "fake", "passes": 1, "tier": tier,
                                 "metrics": {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 61.5}}
            results.append(r)
        emit({"type": "workload_result", "id": rid, "workload": w, "results": results})
    emit({"type": "done", "id": rid})
)PY";

inline const char* prefix_sh = R"SH(#!/bin/sh
# A launch prefix like srun: log, then run the rest of the command line.
echo "$@" >> "@DIR@/prefix.log"
exec "$@"
)SH";

inline std::string replace_dir(std::string s, const std::filesystem::path& dir) {
  for (std::size_t p; (p = s.find("@DIR@")) != std::string::npos;) s.replace(p, 5, dir.string());
  return s;
}

// Writes worker.py and prefix.sh into dir; returns the config's "worker" section.
inline nlohmann::json install_fake_worker(const std::filesystem::path& dir, int max_restarts = 2) {
  std::filesystem::create_directories(dir);
  std::string worker = replace_dir(fake_worker_py, dir);
  // The fake speaks the protocol version of this build.
  for (std::size_t p; (p = worker.find("@PROTOCOL@")) != std::string::npos;)
    worker.replace(p, 10, std::to_string(kopt::protocol::version));
  spit(dir / "worker.py", worker);
  spit(dir / "prefix.sh", replace_dir(prefix_sh, dir));
  std::filesystem::permissions(dir / "worker.py", std::filesystem::perms(0755));
  std::filesystem::permissions(dir / "prefix.sh", std::filesystem::perms(0755));
  return {{"exe", (dir / "worker.py").string()},
          {"launch_prefix", {(dir / "prefix.sh").string()}},
          {"hello_timeout_s", 30},
          {"silence_timeout_s", 60},
          {"max_restarts", max_restarts}};
}

inline int count_lines(const std::filesystem::path& p) {
  int n = 0;
  for (char c : slurp(p)) n += c == '\n';
  return n;
}

}  // namespace kopt::test
