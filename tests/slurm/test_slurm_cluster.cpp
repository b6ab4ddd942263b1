// A real single-node Slurm cluster, started and stopped by this test:
// Debian's munged (own key and socket), slurmctld and slurmd (SlurmUser=root,
// a generated slurm.conf, proctrack/linuxproc, two "GPUs" in gres.conf backed
// by character devices made with mknod, so Slurm sets SLURM_STEP_GPUS and
// CUDA_VISIBLE_DEVICES for steps as on a GPU node). Then:
//  - a step with --gres=gpu:1 gets its GPU in the environment, and the real
//    kopt-worker started through srun with `--gpu auto` reports that it took
//    it (in its hello; there is no GPU here, so the hello says so), and
//    compiles a kernel through srun (a no-GPU request);
//  - `kopt daemon` starts its two workers through srun (a fake python worker
//    speaking the protocol, which logs the Slurm environment it sees), the
//    campaign's requests and answers pass through srun, one worker's job
//    step is cancelled with scancel in the middle of a request, the worker
//    is restarted, its request is run again, and no candidate is blamed;
//  - the same with the workers submitted as batch jobs (`kopt sbatch-worker`
//    as the launch prefix: sbatch, the job dials back over TCP), the job
//    cancelled with scancel.
// Needs root (SlurmUser=root, mknod) and the packages slurmctld, slurmd,
// slurm-client and munge (scripts/setup installs them for the tests);
// without them it skips with the reason.
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "../daemon/support.hpp"
#include "common/subprocess.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

struct cmd {
  int code = -1;
  std::string out, err;
};

cmd run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
        std::string_view input = "", std::chrono::seconds timeout = 120s) {
  // `extra_env` replaces variables of the same name.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    bool replaced = false;
    for (const auto& x : extra_env)
      replaced = replaced || x.rfind(kv.substr(0, kv.find('=') + 1), 0) == 0;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  const auto r = run_capture(argv, env, input, timeout);
  return {r.status.exited ? r.status.code : 128 + r.status.signal, r.out, r.err};
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A daemon of the cluster, in its own process group, output to a file.
pid_t spawn_logged(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const fs::path& log) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> args = argv;
  std::vector<char*> a, e;
  for (auto& s : args) a.push_back(s.data());
  a.push_back(nullptr);
  for (auto& s : env) e.push_back(s.data());
  e.push_back(nullptr);
  const std::string logp = log.string();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(logp.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  return pid;
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(-pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return;
    std::this_thread::sleep_for(100ms);
  }
  ::kill(-pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
}

class SlurmCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* tool :
         {"/usr/sbin/munged", "/usr/sbin/mungekey", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
          "/usr/bin/srun", "/usr/bin/sinfo", "/usr/bin/squeue", "/usr/bin/scancel"})
      if (::access(tool, X_OK) != 0) {
        skip_ =
            std::string(tool) + " is not installed (Debian: slurmctld slurmd slurm-client munge)";
        return;
      }
    if (::geteuid() != 0) {
      skip_ =
          "not root: the test cluster runs with SlurmUser=root and mknod's its fake GPU devices";
      return;
    }
    dir_ = new temp_dir();
    const fs::path d = dir_->path();
    for (const char* s : {"ctld", "spool", "dev"}) fs::create_directories(d / s);
    for (int i = 0; i < 2; ++i) {
      // Slurm wants a character device per GPU; /dev/null's numbers do.
      const std::string node = (d / "dev" / ("nvidia" + std::to_string(i))).string();
      if (::mknod(node.c_str(), S_IFCHR | 0644, makedev(1, 3)) != 0) {
        skip_ = "mknod " + node + " failed: " + std::strerror(errno);
        return;
      }
    }
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    host_ = std::string(host).substr(0, std::string(host).find('.'));
    const auto key = d / "munge.key";
    const cmd k = run({"/usr/sbin/mungekey", "--create", "--keyfile=" + key.string()}, {});
    if (k.code != 0) {
      skip_ = "mungekey failed: " + k.err;
      return;
    }
    ::chmod(key.c_str(), 0400);
    const auto sock = d / "munge.socket";
    pids_.push_back(spawn_logged(
        {"/usr/sbin/munged", "--foreground", "--force", "--socket=" + sock.string(),
         "--key-file=" + key.string(), "--pid-file=" + (d / "munged.pid").string(),
         "--log-file=" + (d / "munged.log").string(), "--seed-file=" + (d / "munge.seed").string()},
        {}, d / "munged.out"));
    if (!eventually([&] { return fs::exists(sock); }, 20s)) {
      skip_ = "munged did not start: " + slurp(d / "munged.log") + slurp(d / "munged.out");
      return;
    }
    conf_ = (d / "slurm.conf").string();
    const auto p = d.string();
    spit(d / "slurm.conf", fmt::format(R"(ClusterName=kopttest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={p1}
SlurmdPort={p2}
AuthType=auth/munge
AuthInfo=socket={p}/munge.socket
CredType=cred/munge
StateSaveLocation={p}/ctld
SlurmdSpoolDir={p}/spool
SlurmctldPidFile={p}/slurmctld.pid
SlurmdPidFile={p}/slurmd.pid
SlurmctldLogFile={p}/slurmctld.log
SlurmdLogFile={p}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
KillWait=2
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=kopt Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
)",
                                       fmt::arg("host", host_), fmt::arg("p", p),
                                       fmt::arg("p1", free_port()), fmt::arg("p2", free_port())));
    spit(d / "gres.conf", fmt::format("NodeName={} Name=gpu File={}/dev/nvidia[0-1]\n", host_, p));
    pids_.push_back(
        spawn_logged({"/usr/sbin/slurmctld", "-D", "-f", conf_}, env(), d / "slurmctld.out"));
    pids_.push_back(spawn_logged({"/usr/sbin/slurmd", "-D", "-f", conf_}, env(), d / "slurmd.out"));
    const bool idle = eventually(
        [&] {
          return run({"/usr/bin/sinfo", "-h", "-o", "%T"}, env(), "", 10s).out.find("idle") == 0;
        },
        60s, 500ms);
    if (!idle) {
      failure_ = "the cluster did not become idle:\n" + slurp(d / "slurmctld.log") +
                 slurp(d / "slurmd.log") + slurp(d / "slurmctld.out") + slurp(d / "slurmd.out");
      return;
    }
    std::cout << "Slurm cluster up on " << host_ << " (" << conf_ << ")\n";
  }

  static void TearDownTestSuite() {
    if (!conf_.empty()) run({"/usr/bin/scancel", "--full", "--user=root"}, env(), "", 20s);
    for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) stop(*it);
    pids_.clear();
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  static std::vector<std::string> env() { return {"SLURM_CONF=" + conf_}; }

  static inline temp_dir* dir_ = nullptr;
  static inline std::string skip_, failure_, host_, conf_;
  static inline std::vector<pid_t> pids_;
};

TEST_F(SlurmCluster, StepGetsItsGpuAndTheWorkerTakesIt) {
  const cmd e = run({"/usr/bin/srun", "-N1", "-n1", "--gres=gpu:1", "/usr/bin/env"}, env());
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("SLURM_STEP_GPUS="), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("CUDA_VISIBLE_DEVICES="), std::string::npos) << e.out;

  const std::string worker = std::string(KOPT_BINARY_DIR) + "/bin/kopt-worker";
  if (::access(worker.c_str(), X_OK) != 0)
    GTEST_SKIP() << "kopt-worker is not built (KOPT_ENABLE_WORKER=OFF)";
  // The real worker through srun: `--gpu auto` takes the step's GPU. (In
  // the sanitizer build LeakSanitizer is off for this one process: it would
  // judge the static CUDA runtime's no-driver path and replace exit 77.)
  std::vector<std::string> wenv = env();
  wenv.push_back("ASAN_OPTIONS=detect_leaks=0:abort_on_error=1");
  const cmd w =
      run({"/usr/bin/srun", "-N1", "-n1", "--gres=gpu:1", worker, "--gpu", "auto"}, wenv, "", 120s);
  const std::string first = w.out.substr(0, w.out.find('\n'));
  std::cout << "kopt-worker --gpu auto through srun: exit " << w.code << "\n  " << first << '\n';
  const json hello = json::parse(first);
  EXPECT_EQ(hello.at("type"), "hello");
  const json sel = hello.at("gpu_selection");
  EXPECT_EQ(sel.at("spec"), "auto");
  EXPECT_FALSE(sel.at("slurm_step_gpus").get<std::string>().empty()) << sel.dump();
  EXPECT_NE(sel.at("how").get<std::string>().find("CUDA_VISIBLE_DEVICES="), std::string::npos)
      << sel.dump();
  EXPECT_EQ(sel.at("ordinal"), 0);
  if (!hello.at("ok").get<bool>()) EXPECT_EQ(w.code, 77) << "no GPU here: the documented exit code";

  // A compile request through srun: NVRTC on the node, no GPU needed.
  const fs::path cubin = dir_->path() / "k.cubin";
  const json rq = {
      {"source", "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }"},
      {"arch", "sm_90a"},
      {"name", "k"},
      {"defines", json::object()},
      {"options", json::array()},
      {"timeout_ms", 120000}};
  const cmd c = run({"/usr/bin/srun", "-N1", "-n1", worker, "compile", "--out", cubin.string()},
                    env(), rq.dump() + "\n", 180s);
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_GT(fs::file_size(cubin), 0u);
  EXPECT_NE(c.out.find("\"status\""), std::string::npos) << c.out;
}

// The fake worker: logs its argv and the Slurm environment of each start,
// and takes 0.2 s per workload. The first request to claim DIR/slow-once
// takes 1 s per workload and is marked in DIR/busy.json (with its job and
// step) while it runs, so that the test's scancel lands mid-request.
const char* kWorker = R"PY(#!/usr/bin/python3
import hashlib, json, os, sys, time
DIR = "@DIR@"
env = {k: os.environ.get(k, "") for k in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES")}
with open(os.path.join(DIR, "starts.log"), "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "env": env, "pid": os.getpid()}) + "\n")
def emit(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
emit({"type": "hello", "protocol": 2, "ok": True, "device": {"name": "Fake GPU " + env["SLURM_STEP_GPUS"], "arch": "sm_90a"},
      "worker_version": "fake"})
for line in sys.stdin:
    if not line.strip():
        continue
    req = json.loads(line)
    rid = req.get("id", "")
    if req.get("type") == "shutdown":
        emit({"type": "bye", "id": rid}); sys.exit(0)
    if req.get("type") != "evaluate":
        emit({"type": "error", "id": rid, "message": "unknown request type"}); continue
    with open(os.path.join(DIR, "requests.log"), "a") as f:
        f.write(json.dumps({"job": env["SLURM_JOB_ID"], "workloads": req["workloads"],
                            "subjects": [hashlib.sha256(json.dumps(s["candidate"], sort_keys=True).encode()).hexdigest()[:12]
                                         for s in req["subjects"]]}) + "\n")
    delay = 0.2
    try:
        os.rename(os.path.join(DIR, "slow-once"), os.path.join(DIR, "slow-once.taken"))
        delay = 1.0
        with open(os.path.join(DIR, ".busy"), "w") as f:
            json.dump(env, f)
        os.replace(os.path.join(DIR, ".busy"), os.path.join(DIR, "busy.json"))
    except OSError:
        pass
    subjects = req["subjects"]
    for s in subjects:
        emit({"type": "compiled", "id": rid, "role": s["role"], "status": "ok"})
    for w in req["workloads"]:
        emit({"type": "workload_begin", "id": rid, "workload": w})
        time.sleep(delay)
        results = []
        for s in subjects:
            h = hashlib.sha256((json.dumps(s["candidate"], sort_keys=True) + w).encode()).digest()
            base = 2000.0 + (h[0] * 256 + h[1]) % 3000
            samples = [base * (1 + 0.001 * i) for i in range(21)]
            results.append({"role": s["role"], "status": "ok",
                            "timing": {"median_ns": samples[10], "samples_ns": samples, "samples": 21,
                                       "q1_ns": samples[5], "q3_ns": samples[15], "rsd": 0.003, "stop_reason": "fake"}})
        emit({"type": "workload_result", "id": rid, "workload": w, "results": results})
    if delay > 0.5:
        os.remove(os.path.join(DIR, "busy.json"))
    emit({"type": "done", "id": rid})
)PY";

std::vector<json> lines_of(const fs::path& p) {
  std::vector<json> out;
  std::istringstream in(slurp(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(json::parse(l));
  return out;
}

// A campaign of the daemon with two workers started through `prefix`;
// one worker's job (or job step) is cancelled with scancel in the middle of
// a request. `step`: cancel the step (srun), else the whole job (sbatch).
void campaign_survives_scancel(const std::vector<std::string>& prefix, bool step,
                               const std::vector<std::string>& env) {
  temp_dir dir;
  const fs::path wdir = dir / "worker";
  fs::create_directories(wdir);
  std::string text = kWorker;
  for (auto p = text.find("@DIR@"); p != std::string::npos; p = text.find("@DIR@"))
    text.replace(p, 5, wdir.string());
  spit(wdir / "worker.py", text);
  fs::permissions(wdir / "worker.py", fs::perms(0755));
  spit(wdir / "slow-once", "");
  json cfg = {
      {"gpus", 2},
      {"worker",
       {{"exe", (wdir / "worker.py").string()},
        {"launch_prefix", prefix},
        {"gpu", "auto"},
        {"hello_timeout_s", 60},
        {"silence_timeout_s", 60},
        {"max_restarts", 4},
        // Timing only: a profiling worker is a second job step that needs
        // its own GPU, and this cluster has two (docs/daemon.md, Slurm).
        {"counters", "none"}}},
      {"limits", {{"backoff_initial_s", 0.2}, {"backoff_max_s", 1}, {"max_step_failures", 100}}}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto file = dir / "vadd.json";
  spit(file, campaign_operator("vadd", 4).dump(2));
  const auto [rc, out] =
      run_kopt({"--db", d.db_path().string(), "submit", file.string()}, dir.path(), "submit");
  ASSERT_EQ(rc, 0) << slurp(dir / "submit.err");
  const store::row_id id = std::stoll(out);
  d.spawn(env);
  d.wait_ready();

  // Cancel the job (step) of a worker that is in the middle of a request.
  ASSERT_TRUE(eventually([&] { return fs::exists(wdir / "busy.json"); }, 90s)) << d.log();
  const json busy = json::parse(slurp(wdir / "busy.json"));
  const std::string target =
      busy.at("SLURM_JOB_ID").get<std::string>() +
      (step ? "." + busy.at("SLURM_STEP_ID").get<std::string>() : std::string());
  const cmd sc = run({"/usr/bin/scancel", target}, env);
  std::cout << "scancel " << target << ": exit " << sc.code << " " << sc.err << '\n';
  ASSERT_EQ(sc.code, 0) << sc.err;

  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 180s))
      << d.campaign_state(id) << "\n"
      << d.log();

  const auto starts = lines_of(wdir / "starts.log");
  std::cout << "worker starts: " << starts.size() << '\n';
  ASSERT_GE(starts.size(), 3u) << "two workers and the one restarted after scancel";
  std::set<std::string> jobs, gpus;
  for (const auto& s : starts) {
    EXPECT_EQ(s.at("argv"), json({"--gpu", "auto"})) << s.dump();
    EXPECT_FALSE(s.at("env").at("SLURM_JOB_ID").get<std::string>().empty())
        << "not started by Slurm: " << s.dump();
    EXPECT_FALSE(s.at("env").at("CUDA_VISIBLE_DEVICES").get<std::string>().empty()) << s.dump();
    jobs.insert(s.at("env").at("SLURM_JOB_ID").get<std::string>());
    gpus.insert(s.at("env").at("CUDA_VISIBLE_DEVICES").get<std::string>());
  }
  EXPECT_EQ(jobs.size(), starts.size()) << "each start is its own Slurm job";
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"})) << "both GPUs of the node were used";
  // The cancelled worker's request was sent again to another worker.
  const auto reqs = lines_of(wdir / "requests.log");
  bool again = false;
  for (std::size_t i = 0; i < reqs.size(); ++i)
    if (reqs[i].at("job") == busy.at("SLURM_JOB_ID"))
      for (std::size_t j = i + 1; j < reqs.size(); ++j)
        again = again || (reqs[j].at("job") != reqs[i].at("job") &&
                          reqs[j].at("subjects") == reqs[i].at("subjects"));
  EXPECT_TRUE(again) << slurp(wdir / "requests.log");
  // No candidate was blamed, and the restart is on record.
  EXPECT_GT(d.scalar("SELECT count(*) FROM evaluations"), 0);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM evaluations WHERE status IN ('crashed','timeout')"), 0);
  EXPECT_GE(d.scalar("SELECT count(*) FROM events WHERE kind = 'worker_restart' AND message LIKE "
                     "'%stopped from outside%'"),
            1)
      << d.log();
  d.signal(SIGTERM);
  const auto ex = d.wait_exit(30s);
  ASSERT_TRUE(ex.has_value());
  EXPECT_TRUE(WIFEXITED(*ex) && WEXITSTATUS(*ex) == 0) << d.log();
}

TEST_F(SlurmCluster, DaemonWorkersThroughSrunSurviveScancel) {
  campaign_survives_scancel({"/usr/bin/srun", "-N1", "-n1", "--gres=gpu:1", "--unbuffered"}, true,
                            env());
}

// Where srun is not possible: each worker is a batch job that connects
// back to `kopt sbatch-worker` on the daemon's node (loopback here).
TEST_F(SlurmCluster, DaemonWorkersAsBatchJobsSurviveScancel) {
  campaign_survives_scancel({kopt_exe(), "sbatch-worker", "--sbatch-arg=--gres=gpu:1",
                             "--advertise=127.0.0.1", "--bind=127.0.0.1", "--"},
                            false, env());
}

}  // namespace
