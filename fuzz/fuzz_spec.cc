// Fuzz target: the JSON compile spec parser (fcb::ParseSpecJson), with a
// dictionary of its keys and values (fuzz/spec.dict). What it accepts must
// pass ValidateSpec again, hold one options entry per target, have every
// input dim a size or a range lo..hi with 1 <= lo <= hi, and name each kept
// output once with non-empty names.
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
  // Every kept output entry names an output ([METHOD:]NAME, both parts
  // non-empty), once.
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    const std::string& o = s.outputs[i];
    const size_t colon = o.find(':');
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || s.outputs[j] == o;
    if (o.empty() || o.back() == ':' || colon == 0 || repeated) {
      std::fprintf(stderr, "ParseSpecJson accepted the output entry '%s'\n", o.c_str());
      std::abort();
    }
  }
  return 0;
}
