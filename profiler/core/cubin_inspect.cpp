#include "core/cubin_inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "core/cubin_rules.hpp"
#include "core/elf_view.hpp"

namespace kopt::harness {
namespace {

constexpr unsigned char stt_func = 2;
constexpr std::uint16_t shn_undef = 0;

}  // namespace

cubin_facts inspect_cubin(std::string_view b) {
  // One ELF reader for the whole inspection (core/elf_view.hpp).
  const elf_view elf(b);
  cubin_facts f;
  for (const auto& e : elf.symbols()) {
    if (e.name.empty()) continue;
    if (e.section == shn_undef) {
      if (e.type == stt_func) f.undefined_functions.push_back(e.name);
      continue;
    }
    if (e.section >= elf.sections().size()) continue;  // special indices
    const std::string& sec = elf.sections()[e.section].name;
    if (e.type == stt_func && sec.rfind(".text.", 0) == 0 && e.bind == 1 /*GLOBAL*/)
      f.kernels.push_back(e.name);
  }
  // Writable state and clock reads: decided by section flags and machine
  // code, never by names (core/cubin_rules.hpp).
  auto data = check_data_sections(elf);
  f.writable_globals = std::move(data.refused_symbols);
  f.data_problems = std::move(data.problems);
  f.exempt_tables = std::move(data.exempt_tables);
  f.module_data_symbols = std::move(data.module_data_symbols);
  f.clock_reads = find_clock_reads_sass(elf);
  for (auto* v : {&f.kernels, &f.writable_globals, &f.undefined_functions}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return f;
}

std::vector<std::string> cubin_facts::problems() const {
  std::vector<std::string> p = data_problems;
  for (const auto& fn : undefined_functions) {
    // Device assert traps on failure, which the harness records as a crash
    // (its message strings are string literals, refused by the data rule).
    if (fn == "__assertfail") continue;
    if (fn == "malloc" || fn == "free" || fn.find("malloc") != std::string::npos)
      p.push_back(fmt::format(
          "device-side memory allocation ('{}') is not allowed: declare a workspace", fn));
    else if (fn == "vprintf")
      p.push_back("device printf is not allowed in candidates");
    else
      p.push_back(fmt::format(
          "the kernel calls an external device function '{}', which kopt does not link", fn));
  }
  return p;
}

}  // namespace kopt::harness
