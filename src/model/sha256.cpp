#include "gantry/model/sha256.h"

#include <openssl/evp.h>

#include <memory>
#include <vector>

#include "gantry/core/file_io.h"

namespace gantry::model {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string to_hex(const unsigned char* d, unsigned n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 0xF];
  }
  return out;
}

MdCtx new_ctx() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) ctx.reset();
  return ctx;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  auto ctx = new_ctx();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!ctx || EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
    return {};
  return to_hex(digest, len);
}

Result<std::string> sha256_file(const std::filesystem::path& path) {
  GANTRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_read(path));
  auto ctx = new_ctx();
  if (!ctx) return Internal("OpenSSL could not create a SHA-256 context");
  std::vector<std::byte> buf(1 << 20);
  while (true) {
    GANTRY_ASSIGN_OR_RETURN(size_t got, read_some(fd.get(), buf, path.string()));
    if (got > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), got) != 1)
      return Internal("OpenSSL SHA-256 update failed");
    if (got < buf.size()) break;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) return Internal("OpenSSL SHA-256 final failed");
  return to_hex(digest, len);
}

struct Sha256::Ctx {
  MdCtx md = new_ctx();
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {}
Sha256::~Sha256() = default;

Status Sha256::update(std::string_view bytes) {
  if (!ctx_->md) return Internal("OpenSSL could not create a SHA-256 context");
  if (EVP_DigestUpdate(ctx_->md.get(), bytes.data(), bytes.size()) != 1)
    return Internal("OpenSSL SHA-256 update failed");
  return Status();
}

Result<std::string> Sha256::hex() {
  if (!ctx_->md) return Internal("OpenSSL could not create a SHA-256 context");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx_->md.get(), digest, &len) != 1) return Internal("OpenSSL SHA-256 final failed");
  ctx_->md.reset();
  return to_hex(digest, len);
}

}  // namespace gantry::model
