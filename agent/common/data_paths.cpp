#include "common/data_paths.hpp"

#include <cstdlib>

#include "common/subprocess.hpp"

// Set by agent/common/CMakeLists.txt. The relative data directory is the
// path from the installed bin/ to share/kopt, so a relocated tree works.
#ifndef KOPT_BUILD_SOURCE_DIR
#define KOPT_BUILD_SOURCE_DIR ""
#endif
#ifndef KOPT_BUILD_BINARY_DIR
#define KOPT_BUILD_BINARY_DIR ""
#endif
#ifndef KOPT_INSTALL_DATADIR
#define KOPT_INSTALL_DATADIR "/usr/local/share/kopt"
#endif
#ifndef KOPT_BIN_TO_DATADIR
#define KOPT_BIN_TO_DATADIR "../share/kopt"
#endif

namespace kopt::data {

namespace fs = std::filesystem;

namespace {

// The installed layout (share/kopt/<this>) and the source layout.
struct layout {
  std::string_view installed;
  std::string_view source;
};

layout layout_of(kind k) {
  switch (k) {
    case kind::prompts:
      return {"prompts", "prompts/templates"};
    case kind::techniques:
      return {"knowledge_base/techniques", "knowledge_base/techniques"};
    case kind::references:
      return {"knowledge_base/references", "knowledge_base/references"};
    case kind::hardware:
      return {"hardware", "configs/hardware"};
    case kind::bench:
      return {"bench", "configs/bench"};
    case kind::examples:
      return {"examples", "configs/examples"};
  }
  return {"", ""};
}

const char* env(const char* n) {
  const char* v = std::getenv(n);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// True when `exe` lies inside the build tree this file was compiled for:
// only then is the source tree a valid place for data.
bool in_build_tree(const fs::path& exe) {
  const std::string_view bin = KOPT_BUILD_BINARY_DIR;
  if (bin.empty() || exe.empty()) return false;
  std::error_code ec;
  const fs::path b = fs::weakly_canonical(fs::path(bin), ec);
  if (ec) return false;
  const fs::path e = fs::weakly_canonical(exe, ec);
  if (ec) return false;
  const auto rel = e.lexically_relative(b);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

std::string_view name(kind k) {
  return layout_of(k).installed;
}

std::string_view name(origin o) {
  switch (o) {
    case origin::environment:
      return "environment";
    case origin::beside_binary:
      return "beside the binary";
    case origin::build_tree:
      return "build tree";
    case origin::install_prefix:
      return "install prefix";
  }
  return "?";
}

std::string lookup::looked_in() const {
  std::string s;
  for (const auto& t : tried) s += (s.empty() ? "" : ", ") + t.dir.string();
  return s;
}

lookup find(kind k) {
  const layout l = layout_of(k);
  lookup r{k, std::nullopt, {}, {}};
  auto consider = [&](fs::path dir, origin how, std::string detail) {
    if (r.found) return;
    candidate_dir c{dir.lexically_normal(), how, std::move(detail)};
    r.tried.push_back(c);
    if (is_dir(c.dir)) r.found = c;
  };
  if (k == kind::prompts) {
    if (const char* d = env("KOPT_PROMPTS_DIR")) {
      // An explicit setting that points nowhere is a mistake, not a fallback.
      consider(d, origin::environment, "$KOPT_PROMPTS_DIR");
      if (!r.found) r.problem = std::string("KOPT_PROMPTS_DIR=") + d + " is not a directory";
      return r;
    }
  }
  if (const char* d = env("KOPT_DATA_DIR"))
    consider(fs::path(d) / l.installed, origin::environment, "$KOPT_DATA_DIR");
  fs::path exe;
  try {
    exe = self_executable();
  } catch (const std::exception&) {
    // No /proc/self/exe: only the environment and the compiled-in prefix.
  }
  if (!exe.empty())
    consider(exe.parent_path() / KOPT_BIN_TO_DATADIR / l.installed, origin::beside_binary,
             exe.string());
  if (in_build_tree(exe))
    consider(fs::path(KOPT_BUILD_SOURCE_DIR) / l.source, origin::build_tree, KOPT_BUILD_BINARY_DIR);
  consider(fs::path(KOPT_INSTALL_DATADIR) / l.installed, origin::install_prefix,
           KOPT_INSTALL_DATADIR);
  return r;
}

fs::path find_dir(kind k) {
  const lookup r = find(k);
  return r.found && r.problem.empty() ? r.found->dir : fs::path();
}

std::string peaks_file(const std::string& flag) {
  if (!flag.empty()) return flag;
  const fs::path dir = find_dir(kind::hardware);
  if (dir.empty()) return "";
  std::error_code ec;
  const fs::path f = dir / "gpus.json";
  return fs::is_regular_file(f, ec) ? f.string() : "";
}

}  // namespace kopt::data
