// Fuzz target: the .npy reader (fcb::ParseNpy), and for what it accepts, the
// writer and a second read: the round trip must give the same array.
#include <cstdio>
#include <cstdlib>

#include "fcb/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = fcb::ParseNpy(data, size, "fuzz input");
  if (!a.ok()) return 0;
  // What was accepted holds exactly shape-many elements.
  uint64_t n = 1;
  for (int64_t d : a.value().shape) n *= static_cast<uint64_t>(d);
  if (a.value().data.size() != n * fcb::NpyElementSize(a.value().dtype)) {
    std::fprintf(stderr, "ParseNpy accepted %zu data bytes for %llu elements\n", a.value().data.size(),
                 static_cast<unsigned long long>(n));
    std::abort();
  }
  auto bytes = fcb::SerializeNpy(a.value());
  if (!bytes.ok()) return 0;  // e.g. a header too long to write back
  auto b = fcb::ParseNpy(bytes.value().data(), bytes.value().size(), "round trip");
  if (!b.ok() || b.value().dtype != a.value().dtype || b.value().shape != a.value().shape ||
      b.value().data != a.value().data) {
    std::fprintf(stderr, "ParseNpy(SerializeNpy(a)) != a\n");
    std::abort();
  }
  return 0;
}
