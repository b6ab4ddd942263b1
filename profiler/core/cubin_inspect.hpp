// Static checks on a compiled cubin (an ELF file), before it is loaded:
// integrity.md forbids writable module-scope device variables (hidden state
// across calls belongs in declared workspace) and device-side malloc/free
// (resource abuse), and we refuse device printf (unbounded output). Reading
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
  std::vector<std::string> writable_globals;   // OBJECT symbols in .nv.global / .nv.global.init
  std::vector<std::string> undefined_functions;  // e.g. malloc, free, vprintf
  // Human-readable integrity problems derived from the above (empty = ok).
  std::vector<std::string> problems() const;
};

// Throws kopt::error when the bytes are not a 64-bit little-endian ELF.
cubin_facts inspect_cubin(std::string_view elf);

}  // namespace kopt::harness
