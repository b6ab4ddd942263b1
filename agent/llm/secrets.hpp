// API keys. A key comes only from an environment variable named in the
// config, or from a file that only its owner can read; never from the config
// itself, so a config can be committed, stored and shown. Keys never reach
// the store, the logs or an error message: every text that leaves the LLM
// layer passes through a redactor that knows the keys in use (a server that
// echoes "Incorrect API key provided: sk-..." must not leak it). The worker
// and compiler processes get an environment with these variables removed.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::llm {

// Reads the key: from the file when `file` is set, else from the variable
// `env_name`. Throws kopt::config_error saying what is missing or unsafe
// (names the variable or file, never prints a value).
//
// `file` may start with "$CREDENTIALS_DIRECTORY/" (or the ${...} form): the
// directory where systemd puts the unit's LoadCredential= files. Such a file
// is systemd's, not ours: it is owned by root and readable by the service
// through an ACL, so it is accepted when nobody but its owner can write it,
// instead of the usual owner-only check (docs/daemon.md, "systemd").
std::string load_api_key(const std::string& env_name, const std::string& file);

// The file with "$CREDENTIALS_DIRECTORY" replaced; throws when the variable
// is needed but unset. Other paths are returned as they are.
std::string expand_credentials_path(const std::string& file);

class redactor {
 public:
  void add(std::string secret);
  std::string apply(std::string_view text) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> secrets_;
};

// Replaces every known secret (and anything shaped like a common API key:
// sk-..., sk-ant-...) with "[REDACTED]".
std::string redact(std::string_view text, const std::vector<std::string>& secrets);

// The current environment as NAME=VALUE entries without the given variables
// (and without any entry whose value is one of `secrets`), for spawning the
// worker and the compiler.
std::vector<std::string> scrubbed_environment(const std::vector<std::string>& names,
                                              const std::vector<std::string>& secrets);

}  // namespace kopt::llm
