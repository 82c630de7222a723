// Fuzz target: the .fcb loader, then an execution of every method that loads.
//
// Input: the bytes of a .fcb file. Before loading, the target makes the
// header's two checksums (metadata, then header) right for the bytes it got,
// so mutations get past them to the structural checks, the FlatBuffers
// verifier and the plans; the weight pool's and blobs' checksums are not
// checked (LoadOptions::verify_checksums = false), so weights may be
// anything. What loads is run once per method on one thread, with inputs
// filled from a fixed pattern. Memory is capped at 64 MiB per execution
// (LoadOptions::max_memory_bytes). Any crash, sanitizer report or leak is a
// finding; a refused file is the expected outcome. Every attachment that
// loads is read (Program::attachment).
//
// FCB_FUZZ_TARGET (environment) forces a target; default: auto.
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "fcb/fcb.h"
#include "format/fcb_header.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace fcb;

void FixChecksums(std::vector<uint8_t>& b) {
  using namespace fcb::format;
  if (b.size() < kHeaderSize) return;
  const uint64_t off = LoadLe64(b.data() + kOffMetaOffset), size = LoadLe64(b.data() + kOffMetaSize);
  if (off <= b.size() && size <= b.size() - off) StoreLe64(b.data() + kOffMetaHash, XXH3_64bits(b.data() + off, size));
  StoreLe64(b.data() + kOffHeaderHash, XXH3_64bits(b.data(), kOffHeaderHash));
}

void RunMethod(const std::shared_ptr<const Program>& program, const std::string& method) {
  auto ex = Execution::Create(program, method, 1);
  if (!ex.ok()) return;
  Execution& e = *ex.value();
  std::vector<uint8_t> buf;
  for (const TensorSpec& in : e.info().inputs) {
    const uint64_t bytes = in.bytes();
    if (bytes > (uint64_t{64} << 20)) return;
    buf.resize(bytes);
    // Small finite values of every dtype: bytes 0x00..0x3f repeating.
    for (uint64_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 7 % 64);
    if (!e.SetInput(in.name, buf.data(), buf.size()).ok()) return;
  }
  if (!e.Run().ok()) return;
  // Read every output byte, so a sanitizer sees an output that points outside memory.
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < e.info().outputs.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(e.output_data(i));
    const uint64_t n = e.info().outputs[i].bytes();
    for (uint64_t j = 0; j < n; ++j) sink = sink ^ p[j];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  FixChecksums(bytes);
  auto& dir = fcb::fuzz::ScratchDir::Get();
  if (!dir.Write("input.fcb", bytes.data(), bytes.size())) return 0;
  LoadOptions options;
  const char* target = std::getenv("FCB_FUZZ_TARGET");
  options.target = target && *target ? target : "auto";
  options.verify_checksums = false;
  options.max_memory_bytes = uint64_t{64} << 20;
  auto program = Program::Load(dir.Path("input.fcb"), options);
  if (!program.ok()) return 0;
  for (const std::string& m : program.value()->methods()) RunMethod(program.value(), m);
  // Every attachment's bytes (checked against their checksum, then read).
  volatile uint8_t sink = 0;
  for (const std::string& name : program.value()->attachments()) {
    auto bytes = program.value()->attachment(name);
    if (bytes.ok())
      for (char c : bytes.value()) sink = sink ^ static_cast<uint8_t>(c);
  }
  return 0;
}
