// Fuzz target: the JSON compile spec parser (fcb::ParseSpecJson), with a
// dictionary of its keys and values (fuzz/spec.dict). What it accepts must
// pass ValidateSpec again, hold one options entry per target, and have every
// input dim a size or a range lo..hi with 1 <= lo <= hi.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fcb/fcb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = fcb::ParseSpecJson(text);
  if (!spec.ok()) {
    if (spec.status().message().empty()) {
      std::fprintf(stderr, "a refusal without a message\n");
      std::abort();
    }
    return 0;
  }
  const fcb::CompileSpec& s = spec.value();
  if (!fcb::ValidateSpec(s).ok() || s.targets.empty() ||
      (!s.target_options.empty() && s.target_options.size() != s.targets.size())) {
    std::fprintf(stderr, "ParseSpecJson accepted a spec that ValidateSpec refuses\n");
    std::abort();
  }
  // Every accepted dim is a size or a range with 1 <= lo <= hi.
  for (const auto& [name, dims] : s.input_shapes)
    for (const fcb::InputDim& d : dims)
      if (d.lo < 1 || d.lo > d.hi) {
        std::fprintf(stderr, "ParseSpecJson accepted the dim %lld..%lld\n", static_cast<long long>(d.lo),
                     static_cast<long long>(d.hi));
        std::abort();
      }
  return 0;
}
