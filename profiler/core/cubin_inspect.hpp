// Static checks on a compiled cubin (an ELF file), before it is loaded:
// integrity.md forbids writable module-scope data (hidden state across calls
// belongs in declared workspace; decided by section flags, core/cubin_rules)
// and device-side malloc/free (resource abuse), and we refuse device printf
// (unbounded output). Clock reads are listed, not refused here: whether they
// are allowed is the operator's setting (integrity.allow_clock_reads). Reading
// the ELF symbol table is exact where scanning source text is not: macros,
// includes and inline PTX cannot hide a symbol from it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::harness {

struct cubin_facts {
  std::vector<std::string> kernels;            // FUNC symbols in .text.<name> sections, global
  std::vector<std::string>
      writable_globals;  // objects refused by the section-flag rule (cubin_rules.hpp)
  std::vector<std::string> data_problems;  // their messages
  std::vector<std::string> exempt_tables;  // math-library tables verified by content
  std::vector<std::string>
      module_data_symbols;               // global/constant objects the worker hashes around calls
  std::vector<std::string> clock_reads;  // from the SASS; decided by integrity.allow_clock_reads
  std::vector<std::string> undefined_functions;  // e.g. malloc, free, vprintf
  // Human-readable integrity problems derived from the above (empty = ok).
  std::vector<std::string> problems() const;
};

// Throws kopt::error when the bytes are not a 64-bit little-endian ELF.
cubin_facts inspect_cubin(std::string_view elf);

}  // namespace kopt::harness
