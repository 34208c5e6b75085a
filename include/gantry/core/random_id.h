// Unpredictable ids: the one generator of the ids Gantry hands to clients (chat completion, response,
// message and tool-call ids). Every bit comes from the kernel's CSPRNG (getrandom(2)), never from a
// seeded PRNG: a response id is the only capability guarding a stored response, so knowing some ids must
// tell nothing about others.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace gantry {

// Fills `out` from getrandom(2) (blocking only until the kernel's pool is first initialised, at boot).
// Aborts the process if the kernel gives none: there is no predictable fallback.
void secure_random_bytes(std::span<unsigned char> out);

// `prefix` + 32 lowercase hex digits: 128 random bits ("chatcmpl-" + ..., "resp_" + ...).
inline constexpr size_t kRandomHexIdDigits = 32;
std::string random_hex_id(std::string_view prefix);

// `prefix` + 24 characters of [a-zA-Z0-9], each uniform (by rejection, no modulo bias): 142 random bits
// ("msg_" + ..., "call_" + ..., "toolu_" + ...).
inline constexpr size_t kRandomBase62IdChars = 24;
std::string random_base62_id(std::string_view prefix);

}  // namespace gantry
