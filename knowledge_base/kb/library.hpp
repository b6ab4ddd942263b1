// Loading the knowledge base from directories: kopt's own technique
// documents plus any the user adds (the daemon config's
// `knowledge_base.directories`, the CLI's `--kb-dir`). Checks that need the
// whole set live here: ids unique across every directory, and every
// cross-reference ("see `other-id`") naming a document that exists. A
// document with errors is reported and left out, so one broken user file
// does not take retrieval down; `kopt kb lint` turns the same diagnostics
// into a failing exit code.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kb/document.hpp"

namespace kopt::kb {

struct load_result {
  std::vector<document> documents;  // without errors, sorted by id
  std::vector<diagnostic> diagnostics;
  std::size_t files = 0;            // documents read (README.md excluded)
  bool ok() const noexcept { return !has_errors(diagnostics); }
};

// Reads every `*.md` except README.md in each directory (not recursive), in
// name order. A missing directory is an error diagnostic, not an exception.
// A reference document's `config` must name an existing file relative to the
// document's directory (resolved into document::config_path).
load_result load_directories(const std::vector<std::filesystem::path>& directories);

// kopt's bundled technique documents: $KOPT_DATA_DIR/knowledge_base/techniques,
// else the source tree's knowledge_base/techniques (a build-tree kopt), else
// <prefix>/share/kopt/knowledge_base/techniques beside the executable. Empty
// when none exists.
std::filesystem::path builtin_directory();

// kopt's bundled reference kernels (knowledge_base/references), found the
// same way; empty when none exists.
std::filesystem::path builtin_reference_directory();

// The built-in directories, techniques then references (unless
// `with_builtin` is false), followed by the user's extra directories,
// duplicates removed.
std::vector<std::filesystem::path> directories(const std::vector<std::filesystem::path>& extra,
                                               bool with_builtin = true);

}  // namespace kopt::kb
