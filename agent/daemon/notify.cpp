#include "daemon/notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifdef KOPT_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace kopt::daemon {

namespace {

#ifndef KOPT_HAVE_LIBSYSTEMD
// The NOTIFY_SOCKET datagram protocol as sd_notify(3) describes it.
bool builtin_notify(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  const std::size_t len = std::strlen(path);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const auto alen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  ssize_t n;
  do {
    n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&addr), alen);
  } while (n < 0 && errno == EINTR);
  close(fd);
  return n == static_cast<ssize_t>(state.size());
}
#endif

}  // namespace

bool notify(const std::string& state) {
#ifdef KOPT_HAVE_LIBSYSTEMD
  return sd_notify(0, state.c_str()) > 0;
#else
  return builtin_notify(state);
#endif
}

std::optional<std::chrono::microseconds> watchdog_interval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr || usec[0] == '\0') return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid && pid[0] != '\0') {
    char* end = nullptr;
    const long p = std::strtol(pid, &end, 10);
    if (end == pid || p != static_cast<long>(getpid())) return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long long v = std::strtoull(usec, &end, 10);
  if (end == usec || v == 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

const char* notify_backend() noexcept {
#ifdef KOPT_HAVE_LIBSYSTEMD
  return "libsystemd";
#else
  return "builtin";
#endif
}

}  // namespace kopt::daemon
