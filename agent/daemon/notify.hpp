// The systemd service protocol (Type=notify): READY=1 once the daemon can
// work, STATUS= lines, WATCHDOG=1 pings from the scheduling loop, STOPPING=1
// and RELOADING=1. Uses libsystemd's sd_notify when kopt was configured with
// it (KOPT_HAVE_LIBSYSTEMD); otherwise a small implementation of the same
// datagram protocol (a message to the AF_UNIX socket named by $NOTIFY_SOCKET,
// abstract when it starts with '@'), because the GPU machines may lack the
// -dev package. Outside systemd ($NOTIFY_SOCKET unset) every call is a no-op.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kopt::daemon {

// Sends one notification ("READY=1\nSTATUS=..."); returns false when not
// under a notify supervisor or when sending failed (never throws: a lost
// notification must not stop the daemon).
bool notify(const std::string& state);

// The watchdog interval systemd expects pings within ($WATCHDOG_USEC, if
// $WATCHDOG_PID is unset or this process); nullopt when there is none.
std::optional<std::chrono::microseconds> watchdog_interval();

// Which implementation is compiled in: "libsystemd" or "builtin".
const char* notify_backend() noexcept;

}  // namespace kopt::daemon
