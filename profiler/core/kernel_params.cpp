#include "core/kernel_params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "core/elf_view.hpp"

namespace kopt::harness {
namespace {

template <typename T>
T read_at(std::string_view b, std::uint64_t off) {
  if (off > b.size() || b.size() - off < sizeof(T)) throw kopt::error("cubin: truncated ELF");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

// EIATTR record layout: one byte format, one byte attribute, then two
// bytes: the value (EIFMT_HVAL, EIFMT_BVAL, EIFMT_NVAL: unused) or, for
// EIFMT_SVAL, the length of the payload that follows.
constexpr std::uint8_t eifmt_sval = 0x04;
constexpr std::uint8_t eiattr_kparam_info = 0x17;

// The 12-byte EIATTR_KPARAM_INFO payload: u32 index, u16 ordinal,
// u16 offset, u32 flags whose bits 18..31 are the parameter's size.
kernel_param decode_kparam(std::string_view b, std::uint64_t off) {
  kernel_param p;
  p.ordinal = read_at<std::uint16_t>(b, off + 4);
  p.offset = read_at<std::uint16_t>(b, off + 6);
  p.size = (read_at<std::uint32_t>(b, off + 8) >> 18) & 0x3fff;
  return p;
}

std::string type_word(std::uint32_t bytes) {
  switch (bytes) {
    case 1:
      return "1 byte";
    default:
      return fmt::format("{} bytes", bytes);
  }
}

std::string describe(const config::launch_arg& a) {
  switch (a.k) {
    case config::launch_arg::kind::tensor:
      return fmt::format("tensor '{}' (a pointer, 8 bytes)", a.name);
    case config::launch_arg::kind::workspace:
      return fmt::format("workspace '{}' (a pointer, 8 bytes)", a.name);
    case config::launch_arg::kind::integer:
      return fmt::format("int \"{}\" as {} ({})", a.name, config::dtype_name(a.type),
                         type_word(launch_arg_bytes(a)));
    case config::launch_arg::kind::scalar:
      return fmt::format("scalar '{}' as {} ({})", a.name, config::dtype_name(a.type),
                         type_word(launch_arg_bytes(a)));
  }
  return "?";
}

std::string kernel_list(const kernel_signatures& sigs) {
  std::string s;
  for (const auto& [k, v] : sigs.params) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}

}  // namespace

kernel_signatures kernel_parameters(std::string_view b) {
  // The ELF structure (headers, section names, bounds) is elf_view's; this
  // reads the .nv.info.KERNEL records inside it.
  const elf_view elf(b);
  kernel_signatures out;
  static const std::string prefix = ".nv.info.";
  static const std::string text = ".text.";
  for (const auto& sec : elf.sections()) {
    const std::string& name = sec.name;
    if (name.rfind(text, 0) == 0 && name.size() > text.size())
      out.functions.insert(name.substr(text.size()));
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string_view info = elf.bytes(sec);
    auto& params = out.params[name.substr(prefix.size())];  // a kernel without parameters has none
    std::uint64_t pos = 0;
    const std::uint64_t end = info.size();
    while (pos + 4 <= end) {
      const auto fmt_byte = read_at<std::uint8_t>(info, pos);
      const auto attr = read_at<std::uint8_t>(info, pos + 1);
      const auto value = read_at<std::uint16_t>(info, pos + 2);
      pos += 4;
      if (fmt_byte != eifmt_sval) continue;
      if (end - pos < value)
        throw kopt::error("cubin: an EIATTR record of " + name + " is truncated");
      if (attr == eiattr_kparam_info && value >= 12) params.push_back(decode_kparam(info, pos));
      pos += value;
    }
    std::sort(params.begin(), params.end(),
              [](const kernel_param& x, const kernel_param& y) { return x.ordinal < y.ordinal; });
  }
  return out;
}

std::uint32_t launch_arg_bytes(const config::launch_arg& a) {
  if (a.k == config::launch_arg::kind::tensor || a.k == config::launch_arg::kind::workspace)
    return 8;
  return static_cast<std::uint32_t>(config::dtype_size(a.type));
}

std::vector<std::string> launch_signature_problems(const std::vector<config::launch>& launches,
                                                   const kernel_signatures& sigs,
                                                   const std::string& what) {
  std::vector<std::string> out;
  for (std::size_t li = 0; li < launches.size(); ++li) {
    const auto& l = launches[li];
    const std::string where = fmt::format("{}: launches[{}] (kernel '{}')", what, li, l.kernel);
    const auto it = sigs.params.find(l.kernel);
    if (it == sigs.params.end()) {
      if (sigs.functions.count(l.kernel)) continue;  // there, but its signature is not described
      out.push_back(
          fmt::format("{}: the compiled module has no kernel '{}' (kernels there: {}); declare it "
                      "extern \"C\" __global__ with exactly that name",
                      where, l.kernel, kernel_list(sigs)));
      continue;
    }
    const auto& ps = it->second;
    if (ps.size() != l.args.size()) {
      out.push_back(fmt::format(
          "{}: the plan passes {} argument(s) but the kernel takes {} parameter(s) (sizes in "
          "bytes: {})",
          where, l.args.size(), ps.size(),
          fmt::join(
              [&] {
                std::vector<std::uint32_t> v;
                for (const auto& p : ps) v.push_back(p.size);
                return v;
              }(),
              ", ")));
      continue;
    }
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::uint32_t want = launch_arg_bytes(l.args[i]);
      if (ps[i].size != want)
        out.push_back(fmt::format(
            "{}: argument {} is {}, but parameter {} of the kernel is {} (check the order and "
            "the \"type\" of the plan's arguments)",
            where, i, describe(l.args[i]), i, type_word(ps[i].size)));
    }
  }
  return out;
}

std::vector<std::string> generator_signature_problems(const std::string& kernel,
                                                      const kernel_signatures& sigs,
                                                      const std::string& what) {
  config::launch l;
  l.kernel = kernel;
  config::launch_arg data;
  data.k = config::launch_arg::kind::tensor;
  data.name = "data";
  config::launch_arg n;
  n.k = config::launch_arg::kind::integer;
  n.name = "n";
  n.type = config::dtype::int64;
  config::launch_arg seed = n;
  seed.name = "seed";
  l.args = {data, n, seed};
  auto out = launch_signature_problems({l}, sigs, what);
  for (auto& p : out)
    p += " (a generator kernel is launched as kernel(T* data, long long n, unsigned long long "
         "seed))";
  return out;
}

std::optional<std::int64_t> max_shared_optin_bytes(std::string_view arch) {
  // "sm_90a" / "compute_90" -> 90. Figures: the CUDA C++ Programming
  // Guide's table of per-block shared memory by compute capability.
  const auto us = arch.find('_');
  if (us == std::string_view::npos) return std::nullopt;
  int cc = 0;
  for (std::size_t i = us + 1; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i)
    cc = cc * 10 + (arch[i] - '0');
  switch (cc) {
    case 70:
      return 98304;  // 96 KiB
    case 75:
      return 65536;  // 64 KiB
    case 80:
    case 87:
      return 166912;  // 163 KiB
    case 86:
    case 89:
    case 120:
    case 121:
      return 101376;  // 99 KiB
    case 90:
    case 100:
    case 103:
      return 232448;  // 227 KiB
    default:
      return std::nullopt;
  }
}

}  // namespace kopt::harness
