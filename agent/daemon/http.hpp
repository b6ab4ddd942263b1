// The daemon's read-only HTTP endpoint (cpp-httplib), loopback by default:
//   GET /health               200 {"state":"ready",...}; 503 with the same JSON
//                             while starting (migrations, worker handshake) or stopping
//   GET /metrics              Prometheus text format 0.0.4
//   GET /api/daemon           the daemon's status (GPUs, active steps, limits)
//   GET /api/campaigns        campaigns, newest first (JSON array), paged:
//                             ?limit=N (default 100, at most 1000) &offset=M;
//                             the X-Total-Count header says how many there are
//   GET /api/campaigns/ID     one campaign with its recent events
//   GET /                     a small dashboard (HTML + fetch of /api/campaigns)
// Handlers never touch scheduling state: they read the service's status
// snapshot and open their own read-only store connection, which in WAL mode
// never blocks the daemon's writers (/metrics keeps one per HTTP thread
// between scrapes: opening it was most of a scrape's cost under load); each
// request's reads are one short snapshot, closed before the response is
// sent, so that no reader pins the WAL and keeps a checkpoint from
// truncating it. The HTTP threads ask for a short scheduling slice
// (http.slice_us, common/sched.hpp).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "store/store.hpp"

namespace httplib {
class Server;
}

namespace kopt::daemon {

class service;

// Builders, shared with tests.
std::string metrics_text(store::store& reader, const nlohmann::json& status);
nlohmann::json campaigns_json(store::store& reader,
                              std::optional<store::row_id> only = std::nullopt,
                              std::optional<std::int64_t> limit = std::nullopt,
                              std::int64_t offset = 0);
// The paging of /api/campaigns from its query string values (empty: absent):
// default 100, at most 1000, offset >= 0. Throws kopt::config_error on a
// value that is not a number.
struct page {
  std::int64_t limit = 100;
  std::int64_t offset = 0;
};
page parse_page(const std::string& limit, const std::string& offset);
const char* dashboard_html();

class http_api {
 public:
  explicit http_api(const service& svc);
  ~http_api();
  // Binds (port 0: any free port) and serves on a thread; returns the port.
  // Throws kopt::error when the address cannot be bound.
  int start(const std::string& address, int port);
  int port() const noexcept { return port_; }
  void stop();

 private:
  const service& svc_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace kopt::daemon
