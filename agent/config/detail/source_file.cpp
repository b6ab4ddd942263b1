// The one place where a config reads a file it names ("source_file" of a
// candidate or a generator kernel). What it reads is copied into the
// operator snapshot and so into the store, where every reader of the
// database and of the HTTP endpoint can see it: reading a file here is
// publishing it. Hence the checks: confinement to a directory (the spool's
// team directory) after symlinks, never a kopt API key file (by device and
// inode, so no symlink or hard link gets round it), only regular files, a
// size limit, and the descriptor that is read is the one that was checked
// (no window for a symlink swap between the check and the read).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/text.hpp"
#include "config/detail/context.hpp"

namespace kopt::config::detail {

namespace {

// Far above any kernel source; keeps a config from pulling in a disk image.
constexpr std::int64_t max_source_bytes = 8 << 20;

std::optional<std::filesystem::path> real_path(const std::filesystem::path& p) {
  std::array<char, PATH_MAX> buf{};
  if (::realpath(p.c_str(), buf.data()) == nullptr) return std::nullopt;
  return std::filesystem::path(buf.data());
}

bool inside(const std::filesystem::path& file, const std::filesystem::path& dir) {
  const auto rel = file.lexically_relative(dir);
  if (rel.empty() || rel == ".") return false;
  return *rel.begin() != "..";
}

// The path the open descriptor refers to, as the kernel sees it.
std::optional<std::filesystem::path> fd_path(int fd) {
  std::array<char, PATH_MAX> buf{};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size() - 1);
  if (n <= 0) return std::nullopt;
  return std::filesystem::path(std::string(buf.data(), static_cast<std::size_t>(n)));
}

// One token and no code: what an API key file holds, never a kernel source.
bool looks_like_a_secret(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return false;
  const auto e = s.find_last_not_of(" \t\r\n");
  const std::string_view t(s.data() + b, e - b + 1);
  if (t.size() < 8) return false;
  return t.find_first_of(" \t\r\n{}();") == std::string_view::npos;
}

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string> read_source_file(context& ctx, const jpath& p,
                                            const std::string& written,
                                            const std::filesystem::path& base_dir) {
  const file_policy& policy = ctx.policy();
  std::filesystem::path fp(written);
  // Messages name the file as written, so they read the same wherever the
  // config is loaded from (and show nothing of the daemon's layout).
  const std::string shown =
      quote(written) + (fp.is_relative() ? " (relative to the config's directory)" : "");
  if (written.empty()) {
    ctx.error(p, "source_file is empty");
    return std::nullopt;
  }
  if (written.find('\0') != std::string::npos) {
    ctx.error(p, "source file name contains a NUL character");
    return std::nullopt;
  }
  if (fp.is_relative()) fp = base_dir / fp;
  const auto real = real_path(fp);
  if (!real) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      ctx.error(p, "source file " + shown + " does not exist");
    else
      ctx.error(p, "cannot open source file " + shown + ": " + std::strerror(e));
    return std::nullopt;
  }
  std::optional<std::filesystem::path> root;
  if (!policy.confine_to.empty()) {
    root = real_path(policy.confine_to);
    if (!root || !inside(*real, *root)) {
      ctx.error(p, "source file " + shown +
                       " is outside this config's spool directory: a spooled config may only "
                       "read files inside its team's spool directory (symlinks are followed "
                       "before this check)");
      return std::nullopt;
    }
  }
  fd_guard f;
  // O_NONBLOCK: a FIFO must not hang the loader; it is refused below.
  f.fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (f.fd < 0) {
    ctx.error(p, "cannot open source file " + shown + ": " + std::strerror(errno));
    return std::nullopt;
  }
  struct stat sb {};
  if (::fstat(f.fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ctx.error(p, "source file " + shown + " is not a regular file");
    return std::nullopt;
  }
  if (root) {
    // A directory on the way may have been swapped for a symlink since
    // realpath: check the file actually opened.
    const auto opened = fd_path(f.fd);
    if (!opened || !inside(*opened, *root)) {
      ctx.error(p, "source file " + shown + " is outside this config's spool directory");
      return std::nullopt;
    }
  }
  for (const auto& key : policy.key_files) {
    struct stat kb {};
    if (key.empty() || ::stat(key.c_str(), &kb) != 0) continue;
    if (kb.st_dev == sb.st_dev && kb.st_ino == sb.st_ino) {
      ctx.error(p, "source file " + shown +
                       " is an API key file of kopt (a provider's api_key_file); it is never "
                       "read into a config");
      return std::nullopt;
    }
  }
  if (sb.st_size > max_source_bytes) {
    ctx.error(p, "source file " + shown + " is larger than " +
                     std::to_string(max_source_bytes >> 20) + " MiB");
    return std::nullopt;
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(sb.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ctx.error(p, "cannot read source file " + shown + ": " + std::strerror(errno));
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::int64_t>(out.size()) > max_source_bytes) {
      ctx.error(p, "source file " + shown + " is larger than " +
                       std::to_string(max_source_bytes >> 20) + " MiB");
      return std::nullopt;
    }
  }
  if (out.find_first_not_of(" \t\r\n") == std::string::npos) {
    ctx.error(p, "source file " + shown + " is empty");
    return std::nullopt;
  }
  if (const auto bad = invalid_utf8_at(out); bad != std::string::npos) {
    // The source goes into JSON (snapshot, store, prompts), which holds UTF-8 only.
    ctx.error(p, "source file " + shown + " is not valid UTF-8 (byte " + std::to_string(bad) +
                     "); save it as UTF-8");
    return std::nullopt;
  }
  if (looks_like_a_secret(out)) {
    // Not kernel code at all, and shaped like a key or password file: its
    // bytes must not reach the store, not even in an error message.
    ctx.error(p, "source file " + shown +
                     " holds a single token and no code, like an API key file; it is not read "
                     "into the config");
    return std::nullopt;
  }
  return out;
}

}  // namespace kopt::config::detail
