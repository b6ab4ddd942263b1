#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace kopt::cli {

std::string short_duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  const auto t = static_cast<long long>(std::llround(s));
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

progress_meter::progress_meter(bool enabled, std::size_t total)
    : enabled_(enabled),
      tty_(enabled && isatty(STDERR_FILENO) == 1),
      total_(total),
      start_(std::chrono::steady_clock::now()) {}

progress_meter::~progress_meter() {
  finish();
}

void progress_meter::finish() {
  if (open_line_) std::fputs("\n", stderr);
  open_line_ = false;
}

std::string progress_meter::timing() const {
  const double el =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = short_duration(el) + " elapsed";
  if (done_ > 0 && done_ < total_)
    s += ", about " +
         short_duration(el / static_cast<double>(done_) * static_cast<double>(total_ - done_)) +
         " left";
  return s;
}

void progress_meter::emit(const std::string& line, bool final_line) {
  if (!enabled_) return;
  if (tty_) {
    // \r and erase-line: one line rewritten; a phase's last line stays.
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    open_line_ = !final_line;
    if (final_line) std::fputs("\n", stderr);
  } else {
    std::fprintf(stderr, "kopt: %s\n", line.c_str());
  }
  std::fflush(stderr);
}

void progress_meter::phase(const std::string& label) {
  label_ = label;
  if (open_line_) {
    std::fputs("\n", stderr);
    open_line_ = false;
  }
  emit(fmt::format("{}  ({})", label_, timing()), false);
}

void progress_meter::note(const std::string& text) {
  emit(fmt::format("{}{}  ({})", label_.empty() ? "" : label_ + "  ", text, timing()), false);
}

void progress_meter::step(const std::string& what) {
  ++done_;
  emit(fmt::format("{}{} {}/{} done  ({})", label_.empty() ? "" : label_ + "  ", what, done_,
                   total_, timing()),
       false);
}

}  // namespace kopt::cli
