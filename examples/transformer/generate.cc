// Generates tokens with the tiny decoder-only transformer compiled into one
// .fcb (methods "prefill" and "decode", every target):
//
//   tiny_decoder_generate MODEL.fcb [--target T] [--tokens N] [--threads N] TOKEN...
//
// The prompt must have as many tokens as the prefill method takes (8 for the
// exported model). Prints the target used and the N tokens chosen greedily.
// See examples/transformer/README.md for the whole recipe.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "greedy.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: tiny_decoder_generate MODEL.fcb [--target T] [--tokens N] [--threads N] TOKEN...\n");
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
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    long long v = 0;
    if (a == "--target" && i + 1 < argc) {
      lo.target = argv[++i];
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
  std::printf("target: %s\ntokens:", program.value()->target().c_str());
  for (int64_t t : g.value().tokens) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
