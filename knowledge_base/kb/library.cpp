#include "kb/library.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "common/data_paths.hpp"


namespace kopt::kb {

namespace fs = std::filesystem;

namespace {

bool read_file(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  out = ss.str();
  return true;
}

}  // namespace

load_result load_directories(const std::vector<fs::path>& dirs) {
  load_result r;
  struct origin {
    std::string file;
    int line;
  };
  std::map<std::string, origin> ids;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      r.diagnostics.push_back({diagnostic::severity::error, dir.string(), 0,
                               "knowledge-base directory does not exist or is not a directory"});
      continue;
    }
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.extension() != ".md" || p.filename() == "README.md") continue;
      if (!it->is_regular_file(ec)) continue;
      files.push_back(p);
    }
    if (ec) {
      r.diagnostics.push_back({diagnostic::severity::error, dir.string(), 0,
                               "cannot list the directory: " + ec.message()});
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      ++r.files;
      std::string text;
      if (!read_file(f, text)) {
        r.diagnostics.push_back(
            {diagnostic::severity::error, f.string(), 0, "cannot read the file"});
        continue;
      }
      parse_result pr = parse_document(text, f.string(), f.stem().string());
      r.diagnostics.insert(r.diagnostics.end(), pr.diagnostics.begin(), pr.diagnostics.end());
      if (!pr.doc) continue;
      if (pr.doc->is_reference()) {
        // A reference is only useful with its kernel: a config that moved or
        // was misspelled makes the document invalid, like a broken example.
        const fs::path cfg = (f.parent_path() / pr.doc->config).lexically_normal();
        if (!fs::is_regular_file(cfg, ec)) {
          r.diagnostics.push_back({diagnostic::severity::error, f.string(),
                                   pr.doc->line_of("config"),
                                   "config '" + pr.doc->config + "' does not exist (looked for " +
                                       cfg.string() + ")"});
          continue;
        }
        pr.doc->config_path = cfg.string();
      }
      const int line = pr.doc->line_of("id");
      const auto [it, inserted] = ids.emplace(pr.doc->id, origin{f.string(), line});
      if (!inserted) {
        r.diagnostics.push_back({diagnostic::severity::error, f.string(), line,
                                 "duplicate id '" + pr.doc->id + "' (also in " + it->second.file +
                                     ":" + std::to_string(it->second.line) + ")"});
        continue;
      }
      r.documents.push_back(std::move(*pr.doc));
    }
  }
  // Cross-references can only be checked against the whole set.
  std::vector<document> kept;
  for (auto& d : r.documents) {
    bool broken = false;
    for (const auto& ref : d.references) {
      if (ids.count(ref.target) == 0) {
        r.diagnostics.push_back({diagnostic::severity::error, d.file, ref.line,
                                 "broken cross-reference: no document with id '" + ref.target +
                                     "'"});
        broken = true;
      } else if (ref.target == d.id) {
        r.diagnostics.push_back({diagnostic::severity::warning, d.file, ref.line,
                                 "the document refers to itself"});
      }
    }
    if (!broken) kept.push_back(std::move(d));
  }
  r.documents = std::move(kept);
  std::sort(r.documents.begin(), r.documents.end(),
            [](const document& a, const document& b) { return a.id < b.id; });
  return r;
}

namespace {

fs::path find_builtin(data::kind k) { return data::find_dir(k); }

}  // namespace

fs::path builtin_directory() { return find_builtin(data::kind::techniques); }

fs::path builtin_reference_directory() { return find_builtin(data::kind::references); }

std::vector<fs::path> directories(const std::vector<fs::path>& extra, bool with_builtin) {
  std::vector<fs::path> out;
  std::set<fs::path> seen;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    fs::path key = fs::weakly_canonical(p, ec);
    if (ec) key = p.lexically_normal();
    if (seen.insert(key).second) out.push_back(p);
  };
  if (with_builtin) {
    for (const fs::path& b : {builtin_directory(), builtin_reference_directory()})
      if (!b.empty()) add(b);
  }
  for (const auto& p : extra) add(p);
  return out;
}

}  // namespace kopt::kb
