// Helpers for the stub's BYTES codec (pybackend/utils/bytes_codec.py), loaded with ctypes.
//
// Serialized BYTES data is a chain: each element's u32 length gives the next element's
// offset, so finding the elements is a sequential scan that numpy cannot vectorise and a
// Python loop does at ~0.3 us per element (UV-11 asks for 10x that). Plain C ABI, no Python
// or numpy headers: one build serves every interpreter and numpy version the stub may run
// under (UV-21/22), and the stub falls back to pure Python where this library is missing.

#include <cstdint>
#include <cstring>

extern "C" {

// Fills starts[i] (offset of element i's bytes, after its length) and lens[i] for up to
// `cap` elements. Returns the number of elements; cap + 1 when data is left after `cap`
// elements (nothing is written for those); -1 for an incomplete length field; -2 for an
// element that extends beyond the buffer. Errors are reported for the first bad element
// in order, as a sequential decoder would.
__attribute__((visibility("default"))) int64_t pb_bytes_index(const uint8_t* data, uint64_t size,
                                                              uint64_t* starts, uint32_t* lens,
                                                              uint64_t cap) {
  uint64_t pos = 0;
  uint64_t n = 0;
  while (pos < size) {
    if (size - pos < 4) return -1;
    uint32_t len;
    std::memcpy(&len, data + pos, 4);  // little-endian hosts only (x86-64, aarch64)
    pos += 4;
    if (len > size - pos) return -2;
    if (n == cap) return static_cast<int64_t>(cap) + 1;
    starts[n] = pos;
    lens[n] = len;
    ++n;
    pos += len;
  }
  return static_cast<int64_t>(n);
}

// Copies element i into row i of `out` (n rows of `width` bytes), zero-padding the rest of
// the row: numpy turns the rows into bytes objects in one astype(object) call. Returns how
// many non-empty elements end in a NUL byte, which that conversion would strip: the caller
// looks for them only when there are any (rare in text, and the search costs ~10 %).
__attribute__((visibility("default"))) uint64_t pb_bytes_pad(const uint8_t* data,
                                                             const uint64_t* starts,
                                                             const uint32_t* lens, uint64_t n,
                                                             uint64_t width, uint8_t* out) {
  uint64_t trailing_nul = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t* row = out + i * width;
    const uint32_t len = lens[i];
    std::memcpy(row, data + starts[i], len);
    std::memset(row + len, 0, width - len);
    trailing_nul += len > 0 && row[len - 1] == 0;
  }
  return trailing_nul;
}

// Serializes n elements into `out`: per element its u32 length (lens[i]), then its bytes.
// Element i starts at src + i * stride, or, with stride 0, right after element i - 1 (the
// elements joined back to back). The encoder (bytes_codec.py) hands over numpy's padded
// matrix of the elements, or their join when that matrix would be too large; interleaving
// the headers is what numpy can only do with index arrays (~150 ns per element, ~5 here).
__attribute__((visibility("default"))) void pb_bytes_pack(const uint8_t* src, uint64_t stride,
                                                          const uint32_t* lens, uint64_t n,
                                                          uint8_t* out) {
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t len = lens[i];
    std::memcpy(out, &len, 4);  // little-endian hosts only, as above
    std::memcpy(out + 4, src, len);
    out += 4 + static_cast<uint64_t>(len);
    src += stride != 0 ? stride : len;
  }
}

}  // extern "C"
