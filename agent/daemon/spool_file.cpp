#include "daemon/spool_file.hpp"

#include <fmt/format.h>

#include <exception>

#include "common/text.hpp"

namespace kopt::daemon {

std::optional<std::string> spool_name_problem(std::string_view name) {
  if (const auto bad = invalid_utf8_at(name); bad != std::string_view::npos)
    return fmt::format("the file name is not valid UTF-8 (byte {} of \"{}\"); rename it", bad,
                       printable_utf8(name));
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return fmt::format("the file name contains a control character; rename it");
  return std::nullopt;
}

spool_verdict examine_spool_file(const std::string& rel, spool_entry_kind kind, std::int64_t size,
                                 std::int64_t max_bytes, std::string_view content,
                                 const std::filesystem::path& dir,
                                 const std::vector<std::filesystem::path>& key_files) {
  spool_verdict v;
  // Every message starts with the name; the name itself may be the problem.
  const std::string shown = printable_utf8(rel);
  try {
    if (kind == spool_entry_kind::symlink) {
      // Following it would let a team submit (and so publish) any file the
      // daemon can read; copy the file into the spool instead.
      v.error = shown +
                ": is a symbolic link; the spool takes regular files only (copy the file "
                "into the spool, do not link it)\n";
      return v;
    }
    if (kind == spool_entry_kind::other) {
      v.error = shown +
                ": is not a regular file (a FIFO, socket or device); the spool takes "
                "regular files only\n";
      return v;
    }
    if (const auto why = spool_name_problem(rel)) {
      v.error = shown + ": " + *why + "\n";
      return v;
    }
    if (size > max_bytes) {
      v.error = fmt::format(
          "{}: {} bytes, more than the spool limit of {} bytes (limits.spool_max_bytes)\n", shown,
          size, max_bytes);
      return v;
    }
    config::file_policy policy;
    policy.confine_to = dir;
    policy.key_files = key_files;
    // Validate exactly the bytes that were hashed; relative source files
    // resolve against the file's own directory.
    auto r = config::load_operator_text(content, rel, dir, policy);
    for (const auto& d : r.diagnostics)
      if (d.level == config::diagnostic::severity::error) v.error += d.to_string() + "\n";
    if (r.ok()) {
      // The store keeps the snapshot as JSON: make sure it can be written
      // now, so that a file that would fail there is rejected here.
      (void)r.op->content_hash();
      v.op = std::move(r.op);
      v.error.clear();
    } else if (v.error.empty()) {
      v.error = shown + ": not a valid operator config\n";
    }
  } catch (const std::exception& e) {
    v.op.reset();
    v.error = fmt::format("{}: cannot be handled: {}\n", shown, e.what());
  }
  // The reason is stored and served as JSON: quoted bytes of the file (a
  // key named in Latin-1) are shown as \xNN.
  v.error = printable_utf8(v.error);
  return v;
}

}  // namespace kopt::daemon
