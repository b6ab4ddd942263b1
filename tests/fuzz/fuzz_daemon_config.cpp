// libFuzzer target: the daemon config loader (the same JSON scanner for
// positions and duplicate keys, then the field checks and the provider
// sections). Any input either loads or throws kopt::config_error naming
// what is wrong; any other exception escapes and is reported as a crash.
// A config that loads must print (what `kopt daemon --check` does).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"
#include "daemon/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto c = kopt::daemon::load_config_text(text, "/nonexistent/kopt-fuzz/daemon.json");
    (void)c.to_json().dump();
    (void)kopt::daemon::config_warnings(c);
  } catch (const kopt::config_error&) {
  }
  return 0;
}
