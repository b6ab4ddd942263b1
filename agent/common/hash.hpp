// Content hashes. SHA-256 (OpenSSL's libcrypto) for anything that names
// content durably: config snapshots, candidate sources, cubin cache keys.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kopt {

// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);
std::string sha256_hex(const void* data, std::size_t size);

}  // namespace kopt
