// Integrity rules on a candidate's compiled code that are decided by what the
// bytes are, never by what symbols are called (issue 17):
//  - writable state: any object in an allocated, writable section that is
//    not per-block or per-thread memory (.nv.global, .nv.global.init, and
//    whatever else a toolkit marks SHF_WRITE|SHF_ALLOC) is refused, whatever
//    its name; CUDA also places `__device__ const` objects and string
//    literals there, so they are refused too. The one exemption is a table
//    of CUDA's own math library, and only when the object's bytes are
//    exactly that table (a name alone exempts nothing); the worker then
//    hashes it, with the module's other data, before and after every call.
//  - clock reads: %globaltimer*, %clock, %clock64 in the PTX, and
//    S2R/S2UR/CS2R of SR_CLOCKLO/HI or SR_GLOBALTIMERLO/HI in the SASS.
// The SASS scan decodes the 128-bit instruction words of sm_70 and newer
// (kopt targets sm_80+): opcode in bits 0-11, special register in bits 72-79.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/elf_view.hpp"

namespace kopt::harness {

struct data_rule_result {
  std::vector<std::string> refused_symbols;  // names of refused objects
  std::vector<std::string> problems;         // one message per refused object or section
  std::vector<std::string> exempt_tables;    // math-library tables verified by content
  // Every named object of the module's global and constant data (refused
  // or not): the worker hashes their device memory around each call.
  std::vector<std::string> module_data_symbols;
};

data_rule_result check_data_sections(const elf_view& elf);

// "where: what" strings, e.g. "PTX: %globaltimer", "SASS .text.k: SR_CLOCKLO".
std::vector<std::string> find_clock_reads_ptx(std::string_view ptx);
std::vector<std::string> find_clock_reads_sass(const elf_view& elf);

// The rejected_integrity message for clock reads (empty list: empty string).
std::string clock_read_problem(const std::vector<std::string>& reads);

}  // namespace kopt::harness
