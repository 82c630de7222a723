// Fuzz target: the ONNX importer and the compiler. Input: a ModelProto's
// bytes. It is compiled for one target (FCB_FUZZ_TARGET, default generic);
// a file the compiler writes must then load with every check on (a compiler
// that writes what the loader refuses is a finding) and run once when its
// arena is small. Refusals are the expected outcome; crashes, sanitizer
// reports, leaks and timeouts are findings.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fcb/fcb.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& dir = fcb::fuzz::ScratchDir::Get();
  if (!dir.Write("model.onnx", data, size)) return 0;
  fcb::CompileSpec spec;
  const char* target = std::getenv("FCB_FUZZ_TARGET");
  spec.targets = {target && *target ? target : "generic"};
  const std::string out = dir.Path("model.fcb");
  auto report = fcb::Compile(dir.Path("model.onnx"), spec, out);
  if (!report.ok()) return 0;
  fcb::LoadOptions options;
  options.target = spec.targets[0];
  options.max_memory_bytes = uint64_t{256} << 20;  // a larger arena may be refused, nothing else
  auto program = fcb::Program::Load(out, options);
  if (!program.ok() && program.status().code() == fcb::StatusCode::kResourceExhausted) return 0;
  if (!program.ok()) {
    std::fprintf(stderr, "the compiler wrote a file the loader refuses: %s\n",
                 program.status().ToString().c_str());
    std::abort();
  }
  for (const std::string& m : program.value()->methods()) {
    auto ex = fcb::Execution::Create(program.value(), m, 1);
    if (!ex.ok()) continue;
    std::vector<uint8_t> buf;
    bool ok = true;
    for (const fcb::TensorSpec& in : ex.value()->info().inputs) {
      if (in.bytes() > (uint64_t{16} << 20)) ok = false;
      if (!ok) break;
      buf.assign(in.bytes(), 0);
      ok = ex.value()->SetInput(in.name, buf.data(), buf.size()).ok();
    }
    if (ok) (void)ex.value()->Run();
  }
  return 0;
}
