#include "llm/secrets.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/error.hpp"

extern char** environ;

namespace kopt::llm {
namespace {

std::string trim_key(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b])) != 0) ++b;
  return s.substr(b);
}

bool key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

}  // namespace

std::string expand_credentials_path(const std::string& file) {
  for (std::string_view prefix : {"$CREDENTIALS_DIRECTORY/", "${CREDENTIALS_DIRECTORY}/"}) {
    if (file.rfind(prefix, 0) != 0) continue;
    const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
    if (dir == nullptr || *dir == '\0') {
      throw config_error("api_key_file " + file +
                         ": $CREDENTIALS_DIRECTORY is not set; under systemd add "
                         "LoadCredential=NAME:/path/to/key to the unit (docs/daemon.md)");
    }
    return std::string(dir) + "/" + file.substr(prefix.size());
  }
  return file;
}

std::string load_api_key(const std::string& env_name, const std::string& file_setting) {
  const std::string file = expand_credentials_path(file_setting);
  // systemd's credentials: root-owned, read through an ACL (see the header).
  const bool from_systemd = file != file_setting;
  if (!file.empty()) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      throw config_error("cannot open API key file " + file + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      throw config_error("cannot stat API key file " + file + ": " + std::strerror(e));
    }
    const bool safe = from_systemd ? (S_ISREG(st.st_mode) && (st.st_mode & 022) == 0)
                                   : (S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0);
    if (!safe) {
      ::close(fd);
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw config_error("API key file " + file +
                         " must be a regular file owned by you and readable only by you "
                         "(it has mode " +
                         mode + "); run: chmod 600 " + file);
    }
    std::string key;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        ::close(fd);
        throw config_error("cannot read API key file " + file + ": " + std::strerror(e));
      }
      if (n == 0) break;
      key.append(buf, static_cast<std::size_t>(n));
      if (key.size() > 65536) {
        ::close(fd);
        throw config_error("API key file " + file +
                           " is larger than 64 KiB; it should hold one key");
      }
    }
    ::close(fd);
    key = trim_key(std::move(key));
    if (key.empty()) throw config_error("API key file " + file + " is empty");
    return key;
  }
  if (env_name.empty()) {
    throw config_error(
        "no API key configured: set api_key_env to the name of an environment variable "
        "(or api_key_file to a file readable only by you)");
  }
  const char* v = std::getenv(env_name.c_str());
  if (v == nullptr || *v == '\0') {
    throw config_error("the environment variable " + env_name +
                       " (api_key_env) is not set or empty");
  }
  return trim_key(v);
}

void redactor::add(std::string secret) {
  if (secret.size() < 4) return;  // too short to redact without mangling text
  std::lock_guard lock(mu_);
  if (std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end())
    secrets_.push_back(std::move(secret));
}

std::string redactor::apply(std::string_view text) const {
  std::lock_guard lock(mu_);
  return redact(text, secrets_);
}

std::string redact(std::string_view text, const std::vector<std::string>& secrets) {
  std::string out(text);
  for (const std::string& s : secrets) {
    if (s.empty()) continue;
    for (std::size_t pos = 0; (pos = out.find(s, pos)) != std::string::npos;) {
      out.replace(pos, s.size(), "[REDACTED]");
      pos += 10;
    }
  }
  // Key-shaped tokens we were not told about (a second key in a proxy's
  // message): "sk-" followed by at least 16 key characters.
  for (std::size_t pos = 0; (pos = out.find("sk-", pos)) != std::string::npos;) {
    if (pos > 0 && key_char(out[pos - 1])) {
      pos += 3;
      continue;
    }
    std::size_t end = pos + 3;
    while (end < out.size() && key_char(out[end])) ++end;
    if (end - pos >= 19) {
      out.replace(pos, end - pos, "[REDACTED]");
      pos += 10;
    } else {
      pos = end;
    }
  }
  return out;
}

std::vector<std::string> scrubbed_environment(const std::vector<std::string>& names,
                                              const std::vector<std::string>& secrets) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : entry.substr(eq + 1);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (!value.empty() && std::find(secrets.begin(), secrets.end(), value) != secrets.end())
      continue;
    out.emplace_back(entry);
  }
  return out;
}

}  // namespace kopt::llm
