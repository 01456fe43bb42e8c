// Element-wise and digest comparison of states, on fixed data: counts of
// differing elements, max absolute and ULP differences, NaNs, chunk location.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "compare/compare.h"

using namespace gpurr;
using namespace gpurr::compare;

namespace {

template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST_CASE("compare: ULP distances", "[replayer][compare]") {
  CHECK(ulpDistance32(bitsOf(1.0f), bitsOf(1.0f)) == 0);
  CHECK(ulpDistance32(bitsOf(1.0f), bitsOf(std::nextafter(1.0f, 2.0f))) == 1);
  CHECK(ulpDistance32(bitsOf(0.0f), bitsOf(-0.0f)) == 0);
  // Across zero: the smallest denormals on both sides are 2 apart.
  CHECK(ulpDistance32(0x00000001u, 0x80000001u) == 2);
  CHECK(ulpDistance32(bitsOf(1.0f), bitsOf(-1.0f)) == 2ull * 0x3f800000u);
  CHECK(ulpDistance32(bitsOf(3.0f), bitsOf(3.5f)) == 0x200000u);
  CHECK(ulpDistance64(0x3ff0000000000000ull, 0x3ff0000000000001ull) == 1);
  CHECK(ulpDistance16(0x3c00, 0x3c01) == 1);
  CHECK(ulpDistance16(0x3c00, 0xbc00) == 2u * 0x3c00u);
}

TEST_CASE("compare: float32 elements", "[replayer][compare]") {
  const std::vector<float> a = {1.0f, 2.0f, 3.0f, 4.0f, -5.0f, 6.0f};
  const std::vector<float> b = {1.0f, std::nextafter(2.0f, 3.0f), 3.5f, 4.0f, -5.0f, 6.0f};
  const ElementDiff d = compareElements(bytesOf(a), bytesOf(b), ElementType::kFloat32, true);
  CHECK(d.type == ElementType::kFloat32);
  CHECK(d.assumed);
  CHECK(d.elements == 6);
  CHECK(d.differing == 2);
  CHECK(d.firstDiffering == 1);
  CHECK(d.maxAbs == Approx(0.5));
  CHECK(d.maxUlp == 0x200000u);
  CHECK(d.nanMismatches == 0);
  CHECK(describe(d) == "2 of 6 float32 (assumed) differ, first at [1], max |d| 0.5, max 2,097,152 ulp");

  const ElementDiff same = compareElements(bytesOf(a), bytesOf(a), ElementType::kFloat32);
  CHECK(same.differing == 0);
  CHECK(same.maxAbs == 0);
  CHECK(describe(same) == "0 of 6 float32 differ");
}

TEST_CASE("compare: NaN and infinity mismatches are counted apart", "[replayer][compare]") {
  const std::vector<float> a = {1.0f, NAN, INFINITY, 2.0f};
  const std::vector<float> b = {1.0f, 1.0f, 3.0f, 2.25f};
  const ElementDiff d = compareElements(bytesOf(a), bytesOf(b), ElementType::kFloat32);
  CHECK(d.differing == 3);
  CHECK(d.nanMismatches == 1);
  CHECK(d.infMismatches == 1);
  CHECK(d.maxAbs == Approx(0.25));  // only the finite pair
  CHECK_THAT(describe(d), Catch::Contains("1 NaN mismatches") && Catch::Contains("1 infinity mismatches"));
}

TEST_CASE("compare: half, bfloat16, double, int32 and bytes", "[replayer][compare]") {
  const std::vector<uint16_t> ha = {0x3c00, 0x4000, 0x0000};  // 1, 2, 0 as float16
  const std::vector<uint16_t> hb = {0x3c01, 0x4000, 0x8000};  // 1 + 2^-10, 2, -0
  const ElementDiff h = compareElements(bytesOf(ha), bytesOf(hb), ElementType::kFloat16);
  CHECK(h.differing == 2);
  CHECK(h.maxAbs == Approx(std::ldexp(1.0, -10)));
  CHECK(h.maxUlp == 1);

  const std::vector<uint16_t> ba = {0x3f80, 0x4040};  // 1, 3 as bfloat16
  const std::vector<uint16_t> bb = {0x3f81, 0x4040};
  const ElementDiff bf = compareElements(bytesOf(ba), bytesOf(bb), ElementType::kBFloat16);
  CHECK(bf.differing == 1);
  CHECK(bf.maxAbs == Approx(std::ldexp(1.0, -7)));
  CHECK(bf.maxUlp == 1);

  const std::vector<double> da = {1.0, 1e300}, db = {1.0 + 1e-9, 1e300};
  const ElementDiff dd = compareElements(bytesOf(da), bytesOf(db), ElementType::kFloat64);
  CHECK(dd.differing == 1);
  CHECK(dd.maxAbs == Approx(1e-9).epsilon(1e-6));

  const std::vector<int32_t> ia = {5, -3, 100}, ib = {5, 4, 90};
  const ElementDiff id = compareElements(bytesOf(ia), bytesOf(ib), ElementType::kInt32);
  CHECK(id.differing == 2);
  CHECK(id.maxAbs == 10);

  // Bytes, and a tail past the last whole float.
  const std::vector<uint8_t> x = {1, 2, 3, 4, 5, 6, 7}, y = {1, 2, 3, 4, 5, 6, 9};
  const ElementDiff tail = compareElements(x, y, ElementType::kFloat32);
  CHECK(tail.elements == 1);
  CHECK(tail.differing == 0);
  CHECK(tail.trailingBytes == 3);
  CHECK(tail.trailingDiffering == 1);
  const ElementDiff raw = compareElements(x, y, ElementType::kBytes);
  CHECK(raw.differing == 1);
  CHECK(raw.firstDiffering == 6);
  CHECK(raw.maxAbs == 2);
}

TEST_CASE("compare: element types are parsed and guessed", "[replayer][compare]") {
  CHECK(parseElementType("f32") == ElementType::kFloat32);
  CHECK(parseElementType("bf16") == ElementType::kBFloat16);
  CHECK(parseElementType("half") == ElementType::kFloat16);
  CHECK_FALSE(parseElementType("f128").has_value());
  CHECK(guessElementType(4096, trace::BlobEncoding::kRaw) == ElementType::kFloat32);
  CHECK(guessElementType(4096, trace::BlobEncoding::kBytePlanes2) == ElementType::kFloat16);
  CHECK(guessElementType(4098, trace::BlobEncoding::kRaw) == ElementType::kBytes);
  CHECK(guessElementType(6, trace::BlobEncoding::kBytePlanes4) == ElementType::kBytes);
}

TEST_CASE("compare: states match on digests, the report locates chunks and elements", "[replayer][compare]") {
  const std::vector<float> va = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> vb = {1.0f, 2.0f, 3.0f, 4.5f};
  RangeState a0{{0x1000, 16, 3, 0}, 0xaaaa, {1, 2, 3}, bytesOf(va)};
  RangeState b0{{0x9000, 16, 3, 0}, 0xbbbb, {1, 9, 3}, bytesOf(vb)};
  RangeState a1{{0x2000, 8, 4, 0}, 0x1111, {}, std::nullopt};
  RangeState b1{{0x2000, 8, 4, 0}, 0x1111, {}, std::nullopt};
  const std::vector<RangeState> a = {a0, a1}, b = {b0, b1};
  CHECK_FALSE(StateComparison::matches(a, b));
  CHECK(StateComparison::matches(a, a));
  CHECK_FALSE(StateComparison::matches(a, std::vector<RangeState>{a0}));

  const StateComparison c = StateComparison::compare(a, b);
  CHECK_FALSE(c.matches());
  CHECK(c.differing() == 1);
  REQUIRE(c.ranges().size() == 2);
  const RangeComparison& r = c.ranges()[0];
  CHECK_FALSE(r.equal);
  CHECK(r.chunks == 3);
  CHECK(r.differingChunks == 1);
  CHECK(r.firstDifferingChunk == 1);
  REQUIRE(r.elements.has_value());
  CHECK(r.elements->assumed);
  CHECK(r.elements->differing == 1);
  CHECK(r.elements->firstDiffering == 3);
  CHECK(r.elements->maxAbs == Approx(0.5));
  CHECK(c.ranges()[1].equal);
  const auto lines = c.describe();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "alloc#3+0x0 (16 B): 1 of 4 float32 (assumed) differ, first at [3], max |d| 0.5, max 1,048,576 ulp; "
        "1 of 3 64 KiB chunks differ, first chunk 1");

  // A known type is not "assumed"; without bytes the digests are shown.
  const StateComparison typed = StateComparison::compare(a, b, ElementType::kInt32);
  CHECK_FALSE(typed.ranges()[0].elements->assumed);
  RangeState noBytes = b0;
  noBytes.bytes.reset();
  const StateComparison digestsOnly =
      StateComparison::compare(std::vector<RangeState>{a0}, std::vector<RangeState>{noBytes});
  CHECK_THAT(digestsOnly.describe()[0], Catch::Contains("digest 000000000000aaaa vs 000000000000bbbb"));
}

TEST_CASE("compare: differing chunks and byte spans, as the diff reads them", "[replayer][compare]") {
  const std::vector<uint64_t> a{1, 2, 3, 4}, b{1, 9, 3, 9};
  CHECK(differingChunks(a, b) == std::vector<uint64_t>{1, 3});
  CHECK(differingChunks(a, std::vector<uint64_t>{1, 2}).empty());  // lists of different lengths compare nothing

  const std::vector<uint8_t> x{0, 1, 2, 3, 4, 5, 6, 7}, y{0, 9, 9, 3, 4, 5, 9, 7};
  const ByteDiff d = compareBytes(x, y);
  CHECK(d.differing == 3);
  CHECK(d.spans == std::vector<std::pair<uint64_t, uint64_t>>{{1, 3}, {6, 7}});
  CHECK(compareBytes(x, x).spans.empty());
}
