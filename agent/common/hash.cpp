#include "common/hash.hpp"

#include <openssl/evp.h>

#include <array>
#include <memory>

#include "common/error.hpp"

namespace kopt {

std::string sha256_hex(const void* data, std::size_t size) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data, size) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest.data(), &len) != 1) {
    throw error("sha256: OpenSSL digest failed");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xF]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return sha256_hex(bytes.data(), bytes.size()); }

}  // namespace kopt
