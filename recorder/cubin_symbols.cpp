// ELF64 symbol-table reader for cubins.
#include "recorder/cubin_symbols.h"

#include <cstring>

namespace gpurr::recorder {

namespace {
template <typename T>
bool readAt(std::span<const uint8_t> b, uint64_t off, T& out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(&out, b.data() + off, sizeof(T));
  return true;
}
}  // namespace

CubinInfo readCubin(std::span<const uint8_t> image) {
  CubinInfo info;
  if (image.size() < 64 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0 || image[4] != 2 /*64-bit*/ ||
      image[5] != 1 /*little endian*/)
    return info;
  info.isElf = true;
  uint32_t flags = 0;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  readAt(image, 0x30, flags);  // e_flags
  readAt(image, 0x28, shoff);
  readAt(image, 0x3a, shentsize);
  readAt(image, 0x3c, shnum);
  // CUDA keeps the SM number in e_flags: bits 0-7 before ELF ABI version 8,
  // bits 8-15 from it on.
  const uint32_t sm = image[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  if (sm >= 20 && sm < 250) info.arch = sm;
  if (shentsize < 64 || shnum == 0) return info;

  auto section = [&](uint32_t i, uint32_t& type, uint64_t& off, uint64_t& size, uint32_t& link, uint64_t& entsize) {
    const uint64_t base = shoff + uint64_t{i} * shentsize;
    return readAt(image, base + 4, type) && readAt(image, base + 24, off) && readAt(image, base + 32, size) &&
           readAt(image, base + 40, link) && readAt(image, base + 56, entsize);
  };
  for (uint32_t i = 0; i < shnum; ++i) {
    uint32_t type, link;
    uint64_t off, size, entsize;
    if (!section(i, type, off, size, link, entsize) || type != 2 /*SHT_SYMTAB*/) continue;
    uint32_t strType, strLink;
    uint64_t strOff, strSize, strEnt;
    if (link >= shnum || !section(link, strType, strOff, strSize, strLink, strEnt)) continue;
    if (strOff > image.size() || image.size() - strOff < strSize) continue;
    if (entsize < 24) continue;
    for (uint64_t s = 0; s + entsize <= size; s += entsize) {
      uint32_t name = 0;
      uint8_t st_info = 0;
      if (!readAt(image, off + s, name) || !readAt(image, off + s + 4, st_info)) break;
      if ((st_info & 0xf) != 2 /*STT_FUNC*/ || name == 0 || name >= strSize) continue;
      const char* p = reinterpret_cast<const char*>(image.data() + strOff + name);
      const size_t maxLen = strSize - name;
      info.functions.emplace_back(p, strnlen(p, maxLen));
    }
  }
  return info;
}

}  // namespace gpurr::recorder
