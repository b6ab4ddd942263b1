// Installs kopt as an administrator would and runs it from outside the
// source tree (issue 22):
//  - `cmake --install --prefix /usr` into a DESTDIR: the FHS layout, the
//    unit and sysusers file, the packaged daemon config;
//  - the installed kopt, run from an unrelated directory with no KOPT_*
//    data variables: `doctor --json` names data directories inside the
//    install tree (found "beside the binary") and none in the source tree;
//    `kb search`, `prompt render`, `validate` and `daemon --check` find
//    their data;
//  - systemd-sysusers creates the kopt user from the installed file (in a
//    scratch root), systemd-analyze security rates the installed unit, and
//    the score (printed) is at most 2.0;
//  - the Debian package: CPack builds kopt_<version>_amd64.deb from the
//    already-built binaries, with dpkg-shlibdeps dependencies; as root it is
//    installed with dpkg -i, `dpkg -L` lists what is expected, the unit
//    passes `systemd-analyze verify`, the packaged kopt finds its data in
//    /usr/share/kopt, and the package is purged again.
// What needs root or systemd's tools skips with the reason when absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../common/test_util.hpp"
#include "common/subprocess.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

extern char** environ;

namespace {

const fs::path kBin(KOPT_BINARY_DIR);
const fs::path kSrc(KOPT_SOURCE_DIR);

struct result {
  int code = -1;
  std::string out, err;
};

// The caller's environment without the variables that would steer the data
// lookup, plus `extra` (which replaces variables of the same name).
std::vector<std::string> clean_env(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const std::string name = kv.substr(0, kv.find('='));
    if (name == "KOPT_DATA_DIR" || name == "KOPT_PROMPTS_DIR" || name == "KOPT_WORKER" ||
        name == "KOPT_DB")
      continue;
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || x.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// argv run in `cwd` (through sh, which only changes directory).
result run(const std::vector<std::string>& argv, const fs::path& cwd,
           const std::vector<std::string>& extra_env = {},
           std::chrono::seconds timeout = std::chrono::seconds(300)) {
  std::vector<std::string> a = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd.string()};
  a.insert(a.end(), argv.begin(), argv.end());
  const auto r = kopt::run_capture(a, clean_env(extra_env), "", timeout);
  return {r.status.exited ? r.status.code : 128 + r.status.signal, r.out, r.err};
}

bool have(const std::string& tool) {
  for (const char* d : {"/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"})
    if (::access((std::string(d) + tool).c_str(), X_OK) == 0) return true;
  return false;
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

// Exposure score from `systemd-analyze security` output.
double exposure(const std::string& out) {
  std::smatch m;
  static const std::regex re(R"(Overall exposure level for [^:]+: ([0-9.]+))");
  if (!std::regex_search(out, m, re)) return -1;
  return std::stod(m[1].str());
}

class Installed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new kopt::test::scratch_dir();
    root_ = dir_->path() / "root";
    outside_ = dir_->path() / "elsewhere";
    fs::create_directories(outside_);
    const auto t0 = std::chrono::steady_clock::now();
    install_ = run(
        {KOPT_CMAKE_COMMAND, "--install", kBin.string(), "--prefix", "/usr", "--component", "kopt"},
        outside_, {"DESTDIR=" + root_.string()});
    std::cout << "cmake --install into DESTDIR: exit " << install_.code << " in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s\n";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(install_.code, 0) << install_.out << install_.err; }

  static fs::path usr() { return root_ / "usr"; }
  static fs::path kopt() { return usr() / "bin/kopt"; }
  static bool with_worker() { return fs::exists(kBin / "bin/kopt-worker"); }
  static std::vector<std::string> db_env() {
    return {"KOPT_DB=" + (dir_->path() / "db/kopt.db").string()};
  }
  // For `doctor`, which runs `kopt-worker versions`: in the sanitizer build
  // LeakSanitizer would judge the static CUDA runtime's allocations on its
  // no-driver path (not kopt's code; exit 23 instead of 0). Leaks in kopt
  // are the other tests' to find.
  static std::vector<std::string> doctor_env() {
    auto e = db_env();
    e.push_back("ASAN_OPTIONS=detect_leaks=0:abort_on_error=1");
    return e;
  }

  static kopt::test::scratch_dir* dir_;
  static fs::path root_, outside_;
  static result install_;
};

kopt::test::scratch_dir* Installed::dir_ = nullptr;
fs::path Installed::root_, Installed::outside_;
result Installed::install_;

TEST_F(Installed, LaysOutTheFhsTree) {
  for (const char* p :
       {"usr/bin/kopt", "usr/share/kopt/prompts/system.md", "usr/share/kopt/hardware/gpus.json",
        "usr/share/kopt/knowledge_base/techniques", "usr/share/kopt/knowledge_base/references",
        "usr/share/kopt/examples/rmsnorm.json", "usr/share/kopt/bench",
        "usr/lib/systemd/system/kopt-daemon.service", "usr/lib/sysusers.d/kopt.conf",
        "etc/kopt/daemon.json", "usr/share/doc/kopt/daemon.md", "usr/share/doc/kopt/README.md"})
    EXPECT_TRUE(fs::exists(root_ / p)) << p;
  if (with_worker()) EXPECT_TRUE(fs::exists(root_ / "usr/bin/kopt-worker"));
  const std::string unit =
      kopt::test::read_text(root_ / "usr/lib/systemd/system/kopt-daemon.service");
  EXPECT_NE(unit.find("ExecStart=/usr/bin/kopt daemon --config /etc/kopt/daemon.json"),
            std::string::npos)
      << unit;
  EXPECT_EQ(unit.find("@KOPT_"), std::string::npos) << "unsubstituted placeholder";
  const json cfg = json::parse(kopt::test::read_text(root_ / "etc/kopt/daemon.json"));
  EXPECT_EQ(cfg.at("state_dir"), "/var/lib/kopt");                     // StateDirectory=kopt
  EXPECT_EQ(cfg.at("worker").at("cache_dir"), "/var/cache/kopt/cubin");  // CacheDirectory=kopt
}

TEST_F(Installed, DoctorNamesDataInsideTheInstallTree) {
  const result r = run({kopt().string(), "doctor", "--json"}, outside_, doctor_env());
  std::cout << r.out.substr(0, 6000) << '\n';
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const json j = json::parse(r.out);
  const std::string share = (usr() / "share/kopt").string() + "/";
  for (const char* k : {"prompts", "knowledge_base/techniques", "knowledge_base/references",
                        "hardware", "bench", "examples"}) {
    const json& e = j.at("data").at(k);
    ASSERT_TRUE(e.at("path").is_string()) << k << ": " << e.dump();
    const std::string p = e.at("path");
    EXPECT_TRUE(starts_with(p, share)) << k << " at " << p;
    EXPECT_FALSE(starts_with(p, kSrc.string())) << k << " comes from the source tree: " << p;
    EXPECT_EQ(e.at("how"), "beside the binary") << k;
    // The build tree is never even tried by an installed binary.
    for (const auto& t : e.at("tried")) EXPECT_NE(t.at("how"), "build tree") << k;
  }
  EXPECT_TRUE(starts_with(j.at("data").at("peaks_file").get<std::string>(), share));
  EXPECT_EQ(j.at("database").at("how"), "KOPT_DB");
  if (with_worker()) {
    EXPECT_EQ(j.at("worker").at("executable"), (usr() / "bin/kopt-worker").string());
    EXPECT_EQ(j.at("worker").at("found"), true);
    EXPECT_FALSE(j.at("versions").at("nvrtc").get<std::string>().empty())
        << j.at("versions").dump();
    EXPECT_FALSE(j.at("versions").at("cuda_toolkit").get<std::string>().empty());
    EXPECT_GT(j.at("versions").at("cupti_api").get<int>(), 0);
    EXPECT_EQ(r.code, 0) << "problems: " << j.at("problems").dump();
  }
  if (j.at("gpus").empty()) {
    // No GPU here: said plainly, as a warning, not a crash.
    bool said = false;
    for (const auto& p : j.at("problems"))
      said = said || p.at("what").get<std::string>().find("driver") != std::string::npos ||
             p.at("what").get<std::string>().find("GPU") != std::string::npos;
    EXPECT_TRUE(said) << j.at("problems").dump();
  }
  // The text form says the same for a person.
  const result t = run({kopt().string(), "doctor"}, outside_, doctor_env());
  EXPECT_NE(t.out.find(share), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("beside the binary"), std::string::npos) << t.out;
}

TEST_F(Installed, CommandsFindTheirData) {
  const fs::path ex = usr() / "share/kopt/examples";
  const result kb = run({kopt().string(), "kb", "search", "shared memory bank conflicts", "--json"},
                        outside_, db_env());
  EXPECT_EQ(kb.code, 0) << kb.err;
  ASSERT_FALSE(json::parse(kb.out).at("snippets").empty()) << kb.out.substr(0, 2000);
  // The document it found is the installed one.
  const std::string id = json::parse(kb.out).at("snippets").at(0).at("id");
  const result show = run({kopt().string(), "kb", "show", id, "--json"}, outside_, db_env());
  ASSERT_EQ(show.code, 0) << show.err;
  const std::string file = json::parse(show.out).at("file");
  EXPECT_TRUE(starts_with(file, usr().string() + "/share/kopt/knowledge_base/")) << file;
  const result pr = run({kopt().string(), "prompt", "render", (ex / "rmsnorm.json").string()},
                        outside_, db_env());
  EXPECT_EQ(pr.code, 0) << pr.err;
  EXPECT_GT(pr.out.size(), 200u) << pr.out;
  const result va = run({kopt().string(), "validate", (ex / "rmsnorm.json").string(),
                         (ex / "vector_add.json").string()},
                        outside_, db_env());
  EXPECT_EQ(va.code, 0) << va.out << va.err;
  // The daemon's check, with a config of its own (the packaged one names
  // /var/lib/kopt).
  const fs::path cfg = dir_->path() / "daemon.json";
  kopt::test::write_text(
      cfg, json{{"state_dir", (dir_->path() / "state").string()}, {"evaluator", "fake"}}.dump());
  const result dc =
      run({kopt().string(), "daemon", "--config", cfg.string(), "--check"}, outside_, db_env());
  ASSERT_EQ(dc.code, 0) << dc.err;
  const json d = json::parse(dc.out).at("data");
  for (const char* k : {"peaks_file", "prompts", "knowledge_base"}) {
    ASSERT_TRUE(d.at(k).is_string()) << k << ": " << d.dump();
    EXPECT_TRUE(starts_with(d.at(k).get<std::string>(), usr().string() + "/share/kopt/"))
        << k << ": " << d.at(k);
  }
}

TEST_F(Installed, SysusersCreatesTheKoptUser) {
  if (!have("systemd-sysusers"))
    GTEST_SKIP() << "systemd-sysusers is not installed (Debian: systemd)";
  const fs::path sys = dir_->path() / "sysroot";
  fs::create_directories(sys / "etc");
  const result r = run({"systemd-sysusers", "--root=" + sys.string(),
                        (root_ / "usr/lib/sysusers.d/kopt.conf").string()},
                       outside_);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string passwd = kopt::test::read_text(sys / "etc/passwd");
  EXPECT_NE(passwd.find("kopt:x:"), std::string::npos) << passwd;
  EXPECT_NE(passwd.find(":/var/lib/kopt:/usr/sbin/nologin"), std::string::npos) << passwd;
  EXPECT_NE(kopt::test::read_text(sys / "etc/group").find("kopt:x:"), std::string::npos);
}

TEST_F(Installed, UnitIsRatedOkBySystemdAnalyze) {
  if (!have("systemd-analyze"))
    GTEST_SKIP() << "systemd-analyze is not installed (Debian: systemd)";
  const fs::path unit = root_ / "usr/lib/systemd/system/kopt-daemon.service";
  const result r =
      run({"systemd-analyze", "security", "--offline=yes", "--no-pager", unit.string()}, outside_);
  const double score = exposure(r.out + r.err);
  std::cout << "systemd-analyze security --offline=yes kopt-daemon.service: exposure " << score
            << "\n";
  std::cout << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << '\n';
  ASSERT_GE(score, 0) << r.out << r.err;
  EXPECT_LE(score, 2.0) << "the unit must rate OK (at most 2.0)";
  // Each hardening choice the issue names is there.
  const std::string text = kopt::test::read_text(unit);
  for (const char* k :
       {"DevicePolicy=closed", "DeviceAllow=char-nvidia* rw", "StateDirectory=kopt",
        "CacheDirectory=kopt", "LogsDirectory=kopt", "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=\n", "RestrictAddressFamilies=", "UMask=", "ProtectClock=yes",
        "LoadCredential="})
    EXPECT_NE(text.find(k), std::string::npos) << k;
  // DeviceAllow names NVIDIA nodes only.
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);)
    if (starts_with(l, "DeviceAllow=")) EXPECT_NE(l.find("nvidia"), std::string::npos) << l;
}

// The .deb: built from this build's binaries, inspected, and (as root)
// installed, listed, verified and purged.
TEST_F(Installed, DebianPackage) {
  if (!have("dpkg-deb") || !have("dpkg-shlibdeps"))
    GTEST_SKIP() << "dpkg-deb/dpkg-shlibdeps are not installed (Debian: dpkg-dev)";
  const fs::path pkg = dir_->path() / "pkg";
  const auto t0 = std::chrono::steady_clock::now();
  const result c = run({KOPT_CPACK_COMMAND, "-G", "DEB", "--config",
                        (kBin / "CPackConfig.cmake").string(), "-B", pkg.string()},
                       outside_);
  std::cout << "cpack -G DEB: exit " << c.code << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  const fs::path deb = pkg / ("kopt_" + std::string(KOPT_VERSION_STRING) + "_amd64.deb");
  ASSERT_TRUE(fs::exists(deb)) << c.out;
  const result depends = run({"dpkg-deb", "-f", deb.string(), "Depends"}, outside_);
  std::cout << "Depends: " << depends.out;
  EXPECT_NE(depends.out.find("libc6"), std::string::npos) << "dpkg-shlibdeps gave no dependencies";
  EXPECT_NE(depends.out.find("libcurl"), std::string::npos) << depends.out;
  EXPECT_NE(depends.out.find("libsqlite3"), std::string::npos) << depends.out;
  const result contents = run({"dpkg-deb", "-c", deb.string()}, outside_);
  for (const char* p :
       {"./usr/bin/kopt", "./usr/share/kopt/prompts/", "./usr/share/kopt/hardware/gpus.json",
        "./usr/lib/systemd/system/kopt-daemon.service", "./usr/lib/sysusers.d/kopt.conf",
        "./etc/kopt/daemon.json", "./usr/share/doc/kopt/daemon.md"})
    EXPECT_NE(contents.out.find(p), std::string::npos) << p;
  EXPECT_EQ(contents.out.find("./usr/local"), std::string::npos);

  if (::geteuid() != 0)
    GTEST_SKIP() << "not root: the package was built and inspected but not installed with dpkg -i";
  if (run({"dpkg-query", "-W", "-f=${Status}", "kopt"}, outside_)
          .out.find("install ok installed") != std::string::npos)
    GTEST_SKIP() << "a kopt package is already installed here; not replacing it";
  const bool had_user = run({"getent", "passwd", "kopt"}, outside_).code == 0;
  const result in = run({"dpkg", "-i", deb.string()}, outside_, {"DEBIAN_FRONTEND=noninteractive"});
  ASSERT_EQ(in.code, 0) << in.out << in.err;
  struct purge {
    bool had_user;
    ~purge() {
      run({"dpkg", "--purge", "kopt"}, "/");
      if (!had_user) run({"userdel", "kopt"}, "/");
    }
  } cleanup{had_user};
  const result list = run({"dpkg", "-L", "kopt"}, outside_);
  for (const char* p :
       {"/usr/bin/kopt", "/usr/share/kopt/prompts/system.md",
        "/usr/share/kopt/knowledge_base/techniques", "/usr/share/kopt/hardware/gpus.json",
        "/usr/lib/systemd/system/kopt-daemon.service", "/usr/lib/sysusers.d/kopt.conf",
        "/etc/kopt/daemon.json", "/usr/share/doc/kopt/daemon.md"})
    EXPECT_NE(list.out.find(p), std::string::npos) << p << " not in dpkg -L kopt";
  if (with_worker()) EXPECT_NE(list.out.find("/usr/bin/kopt-worker"), std::string::npos);
  EXPECT_NE(run({"dpkg-query", "-W", "-f=${Conffiles}", "kopt"}, outside_)
                .out.find("/etc/kopt/daemon.json"),
            std::string::npos);
  if (have("systemd-sysusers"))
    EXPECT_EQ(run({"getent", "passwd", "kopt"}, outside_).code, 0) << "postinst made no user";

  const result doc = run({"/usr/bin/kopt", "doctor", "--json"}, outside_, doctor_env());
  ASSERT_TRUE(doc.code == 0 || doc.code == 1) << doc.err;
  const json j = json::parse(doc.out);
  EXPECT_EQ(j.at("data").at("prompts").at("path"), "/usr/share/kopt/prompts");
  EXPECT_EQ(j.at("data").at("hardware").at("path"), "/usr/share/kopt/hardware");

  if (have("systemd-analyze")) {
    const result v =
        run({"systemd-analyze", "verify", "/usr/lib/systemd/system/kopt-daemon.service"}, outside_);
    std::cout << "systemd-analyze verify: exit " << v.code << " " << v.out << v.err << '\n';
    EXPECT_EQ(v.code, 0) << v.out << v.err;
    const result s = run({"systemd-analyze", "security", "--offline=yes", "--no-pager",
                          "/usr/lib/systemd/system/kopt-daemon.service"},
                         outside_);
    std::cout << "installed unit exposure: " << exposure(s.out + s.err) << '\n';
    EXPECT_LE(exposure(s.out + s.err), 2.0);
    EXPECT_GE(exposure(s.out + s.err), 0);
  }
}

}  // namespace
