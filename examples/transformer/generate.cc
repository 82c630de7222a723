// Generates tokens with the tiny decoder-only transformer compiled into one
// .fcb (methods "prefill" and "decode", every target):
//
//   tiny_decoder_generate MODEL.fcb [--target T] [--tokens N] [--threads N] [--logits OUT.npy] TOKEN...
//
// The prompt must have as many tokens as the prefill method takes (8 for the
// exported model). Prints the target used and the N tokens chosen greedily;
// --logits writes the logits each token was chosen from ([N, vocab] float32:
// row 0 from prefill, the others from decode), to compare with a reference.
// See examples/transformer/README.md for the whole recipe.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/npy.h"
#include "greedy.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tiny_decoder_generate MODEL.fcb [--target T] [--tokens N] [--threads N] [--logits OUT.npy] "
               "TOKEN...\n");
  return 2;
}

bool ParseInt(const char* s, long long* out) {
  char* end = nullptr;
  *out = std::strtoll(s, &end, 10);
  return end != s && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string path = argv[1];
  fcb::LoadOptions lo;
  long long n = 16, threads = 1;
  std::vector<int64_t> prompt;
  std::string logits_path;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    long long v = 0;
    if (a == "--target" && i + 1 < argc) {
      lo.target = argv[++i];
    } else if (a == "--logits" && i + 1 < argc) {
      logits_path = argv[++i];
    } else if (a == "--tokens" && i + 1 < argc && ParseInt(argv[i + 1], &v) && v > 0) {
      n = v, ++i;
    } else if (a == "--threads" && i + 1 < argc && ParseInt(argv[i + 1], &v) && v > 0) {
      threads = v, ++i;
    } else if (ParseInt(argv[i], &v) && v >= 0) {
      prompt.push_back(v);
    } else {
      std::fprintf(stderr, "error: unexpected argument '%s'\n", argv[i]);
      return Usage();
    }
  }
  auto program = fcb::Program::Load(path, lo);
  if (!program.ok()) {
    std::fprintf(stderr, "error: %s\n", program.status().message().c_str());
    return 1;
  }
  auto g = fcb::example::GreedyGenerate(program.value(), prompt, static_cast<int>(n), static_cast<int>(threads));
  if (!g.ok()) {
    std::fprintf(stderr, "error: %s\n", g.status().message().c_str());
    return 1;
  }
  if (!logits_path.empty()) {
    const auto& rows = g.value().logits;
    fcb::NpyArray a;
    a.dtype = fcb::kNpyF32;
    a.shape = {static_cast<int64_t>(rows.size()), rows.empty() ? 0 : static_cast<int64_t>(rows[0].size())};
    for (const auto& r : rows) {
      const auto* b = reinterpret_cast<const uint8_t*>(r.data());
      a.data.insert(a.data.end(), b, b + r.size() * sizeof(float));
    }
    const fcb::Status s = fcb::WriteNpy(logits_path, a);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    }
  }
  std::printf("target: %s\ntokens:", program.value()->target().c_str());
  for (int64_t t : g.value().tokens) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
