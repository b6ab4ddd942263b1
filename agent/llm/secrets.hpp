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
std::string load_api_key(const std::string& env_name, const std::string& file);

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
