#include "core/cubin_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <regex>
#include <set>

#include "common/hash.hpp"

namespace kopt::harness {
namespace {

// CUDA's math library keeps its argument-reduction and coefficient tables in
// .nv.global.init, a writable section, next to the candidate's own data
// (CUDA 13.0 NVRTC, sm_90a: sinf/cosf/tanf pull in __cudart_i2opi_f,
// sin/cos in __cudart_i2opi_d and __cudart_sin_cos_coeffs). They are
// recognised by size and SHA-256 of their initial bytes, measured from
// cubins of that toolkit; a toolkit that changes them makes honest users of
// sinf refused with a message naming the table, which is the safe failure.
struct known_table {
  const char* name;
  std::uint64_t size;
  const char* sha256;
};
constexpr known_table math_tables[] = {
    {"__cudart_i2opi_f", 24, "af58a7804afd16e4e7a715bd29412e82374ac0eb2196ae5f00fbd5835af8006d"},
    {"__cudart_i2opi_d", 144, "7ede62875c004cc8c2847b487cb377f75c153593f45bab10b272128e31690cde"},
    {"__cudart_sin_cos_coeffs", 128,
     "bf6a9587812432cf5649f28013165faa5a19d2ad0f66fd69cbf13096c2ea4263"},
};

bool is_math_table(const elf_symbol& y, std::string_view bytes) {
  if (bytes.size() != y.size || bytes.empty())
    return false;  // NOBITS: no initial bytes, not a table
  const std::string h = sha256_hex(bytes);
  for (const auto& t : math_tables)
    if (y.size == t.size && h == t.sha256) return true;
  return false;
}

// Shared memory (per block) and local memory (per thread) do not outlive a
// launch; everything else that is allocated and writable does.
bool per_launch_memory(const elf_section& s) {
  return s.name.rfind(".nv.shared", 0) == 0 || s.name.rfind(".nv.local", 0) == 0;
}

// User constant banks (.nv.constant1..N); bank 0 holds kernel parameters.
bool constant_data(const elf_section& s) {
  return s.name.rfind(".nv.constant", 0) == 0 && s.name.rfind(".nv.constant0", 0) != 0;
}

constexpr unsigned char stt_object = 1;

}  // namespace

data_rule_result check_data_sections(const elf_view& elf) {
  data_rule_result r;
  const auto& secs = elf.sections();
  std::set<std::size_t> with_symbols;
  std::set<std::string> hashed;
  for (const auto& y : elf.symbols()) {
    if (y.type != stt_object || y.section == 0 || y.section >= secs.size() || y.name.empty())
      continue;
    const auto& s = secs[y.section];
    if (!s.allocated() || per_launch_memory(s)) continue;
    with_symbols.insert(y.section);
    if (s.writable() || constant_data(s)) hashed.insert(y.name);
    if (!s.writable()) continue;
    const std::string_view bytes = elf.bytes(y);
    if (is_math_table(y, bytes)) {
      r.exempt_tables.push_back(y.name);
      continue;
    }
    r.refused_symbols.push_back(y.name);
    if (y.name[0] == '$')
      r.problems.push_back(
          fmt::format("a string literal ('{}', {} bytes) sits in the writable section {}: a "
                      "candidate could keep state in it "
                      "through a cast; remove string literals (assert messages, printf formats) "
                      "from the kernel",
                      y.name, y.size, s.name));
    else if (s.has_file_bytes())
      r.problems.push_back(
          fmt::format("module-scope object '{}' sits in the writable section {} (CUDA puts "
                      "initialised __device__ data there, "
                      "`const` or not): keep state in a declared workspace buffer (refilled before "
                      "every call) and read-only "
                      "tables in __constant__ memory",
                      y.name, s.name));
    else
      r.problems.push_back(
          fmt::format("writable module-scope device variable '{}' (section {}) is not allowed: "
                      "keep state in a declared "
                      "workspace buffer (it is refilled before every call); read-only tables "
                      "belong in __constant__ memory",
                      y.name, s.name));
  }
  // Writable bytes no symbol names (hand-written PTX can declare them).
  for (std::size_t i = 0; i < secs.size(); ++i) {
    const auto& s = secs[i];
    if (s.allocated() && s.writable() && !s.executable() && !per_launch_memory(s) && s.size > 0 &&
        !with_symbols.count(i))
      r.problems.push_back(fmt::format(
          "the writable section {} holds {} bytes that no symbol names", s.name, s.size));
  }
  r.module_data_symbols.assign(hashed.begin(), hashed.end());
  for (auto* v : {&r.refused_symbols, &r.exempt_tables}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return r;
}

std::vector<std::string> find_clock_reads_ptx(std::string_view ptx) {
  static const std::regex re(
      R"(%(globaltimer_lo|globaltimer_hi|globaltimer|clock64|clock_hi|clock)\b)");
  std::set<std::string> found;
  std::size_t pos = 0;
  while (pos < ptx.size()) {
    std::size_t end = ptx.find('\n', pos);
    if (end == std::string_view::npos) end = ptx.size();
    std::string line(ptx.substr(pos, end - pos));
    if (const auto c = line.find("//"); c != std::string::npos) line.resize(c);  // PTX comments
    for (std::sregex_iterator it(line.begin(), line.end(), re), e; it != e; ++it)
      found.insert((*it)[0].str());
    pos = end + 1;
  }
  std::vector<std::string> out;
  for (const auto& f : found) out.push_back("PTX: " + f);
  return out;
}

std::vector<std::string> find_clock_reads_sass(const elf_view& elf) {
  // Opcodes (bits 0-11) of the instructions that read a special register
  // into a register: CS2R, S2R, S2UR. Special registers (bits 72-79).
  constexpr std::uint32_t cs2r = 0x805, s2r = 0x919, s2ur = 0x9c3;
  auto sr_name = [](unsigned v) -> const char* {
    switch (v) {
      case 0x50:
        return "SR_CLOCKLO";
      case 0x51:
        return "SR_CLOCKHI";
      case 0x52:
        return "SR_GLOBALTIMERLO";
      case 0x53:
        return "SR_GLOBALTIMERHI";
      default:
        return nullptr;
    }
  };
  std::set<std::string> found;
  for (const auto& s : elf.sections()) {
    if (!s.executable() || s.name.rfind(".text.", 0) != 0 || s.size % 16 != 0) continue;
    const std::string_view code = elf.bytes(s);
    for (std::size_t i = 0; i + 16 <= code.size(); i += 16) {
      std::uint64_t lo = 0, hi = 0;
      std::memcpy(&lo, code.data() + i, 8);
      std::memcpy(&hi, code.data() + i + 8, 8);
      const auto op = static_cast<std::uint32_t>(lo & 0xFFF);
      if (op != cs2r && op != s2r && op != s2ur) continue;
      if (const char* n = sr_name(static_cast<unsigned>((hi >> 8) & 0xFF)))
        found.insert(fmt::format("SASS {}: {}", s.name, n));
    }
  }
  return {found.begin(), found.end()};
}

std::string clock_read_problem(const std::vector<std::string>& reads) {
  if (reads.empty()) return {};
  return fmt::format(
      "the kernel reads a clock ({}): a kernel that can tell how long it has run can tell timed "
      "calls from checked "
      "ones, so kopt refuses it; remove clock64()/clock()/%globaltimer reads (an operator may "
      "allow them with "
      "integrity.allow_clock_reads, recorded with every result)",
      fmt::join(reads, ", "));
}

}  // namespace kopt::harness
