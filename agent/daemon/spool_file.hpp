// What the spool decides about one file, before anything touches the store:
// is its name usable, is it a regular file, and is its content a valid
// operator config whose source files stay inside the team's spool
// directory and are none of kopt's API key files. Kept apart from the
// queue (queue.cpp records the verdict and moves the file) so that the
// decision is a pure function of (name, kind of file, bytes, policy): the
// libFuzzer target tests/fuzz/fuzz_spool.cpp drives it with arbitrary
// names and bytes, and nothing here may throw for any input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "config/operator.hpp"

namespace kopt::daemon {

// How the directory entry looked (lstat, never following a symlink).
enum class spool_entry_kind { regular, symlink, other };

struct spool_verdict {
  std::optional<config::operator_config> op;  // set: accept
  std::string error;                          // otherwise: why, one problem a line
};

// A name usable as it is in the store, in JSON and in messages: valid
// UTF-8 and no control characters. Returns why not, or nullopt.
std::optional<std::string> spool_name_problem(std::string_view name);

// The verdict on a spool file. `rel` is its path relative to the spool
// (team/name.json), `dir` the directory it sits in (the team's spool
// directory: source files must resolve inside it), `key_files` the API
// key files of the daemon's providers (never read). `content` is read only
// for a regular file of at most max_bytes (`size`). Never throws.
spool_verdict examine_spool_file(const std::string& rel, spool_entry_kind kind, std::int64_t size,
                                 std::int64_t max_bytes, std::string_view content,
                                 const std::filesystem::path& dir,
                                 const std::vector<std::filesystem::path>& key_files);

}  // namespace kopt::daemon
