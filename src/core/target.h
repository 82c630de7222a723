// Hardware targets: the instruction-set levels a context can be compiled for,
// and what this host can run.
//
// A target is a stable name stored in .fcb files. Each maps to one Highway
// target whose kernels the runtime calls directly once the program is loaded
// (dispatch is hoisted to load time, never per kernel call).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fcb {

// One enumerator per row of the target manifest (core/targets.def), in its
// order. Stored in files by name, never by number; the numbers index tables.
enum class TargetId : uint8_t {
#define FCB_TARGET(id, ...) id,
#include "core/targets.def"
#undef FCB_TARGET
};
inline constexpr int kNumTargetIds = 0
#define FCB_TARGET(...) +1
#include "core/targets.def"
#undef FCB_TARGET
    ;

enum class TargetArch : uint8_t { kAny, kX86_64, kAArch64 };

struct TargetInfo {
  TargetId id;
  const char* name;         // stable name used in specs and files
  const char* description;  // human words for `fcb targets`
  int score;                // higher = preferred when the host can run it
  TargetArch arch;          // the CPU family whose code it holds
  // SVE vector lengths in bits it has code for, each length its own bit
  // (128 | 256 | 512); 0 for a target without SVE.
  unsigned sve_lengths;
};

// Every target the compiler knows, in the manifest's order (generic first).
const std::vector<TargetInfo>& KnownTargets();
std::optional<TargetId> TargetFromName(std::string_view name);
const char* TargetName(TargetId id);
std::string KnownTargetNames();  // "generic, x86-64-v2, ..., armv9-a"
const char* ArchName(TargetArch arch);  // "any", "x86-64", "aarch64"

// What the CPU reports and what the OS has enabled (XCR0 for the AVX and
// AVX-512 register state). Filled once per process; pure data.
struct HostFeatures {
  bool sse42 = false, popcnt = false, ssse3 = false;
  bool avx = false, avx2 = false, fma = false, bmi1 = false, bmi2 = false, f16c = false,
       lzcnt = false, movbe = false;
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false, avx512vl = false;
  // Integer dot products (8-bit multiply, 32-bit accumulate): not part of any
  // x86-64 level; the int8 kernels use them where present (kernels/int8.h).
  bool avx512vnni = false, avxvnni = false;
  bool avx512vbmi = false;  // byte permutes (the int8 table lookup)
  bool os_avx = false;     // XCR0 bits 1,2 (SSE, AVX state)
  bool os_avx512 = false;  // XCR0 bits 5,6,7 (opmask, ZMM_Hi256, Hi16_ZMM)
  // AArch64, from the kernel's hardware capability bits (AT_HWCAP, AT_HWCAP2).
  bool asimd = false, fphp = false, asimdhp = false, asimddp = false, sve = false, sve2 = false;
  int sve_bits = 0;  // the SVE vector length the OS gives this thread (PR_SVE_GET_VL), 0 without SVE
};

// SVE code is compiled for fixed vector lengths (so that vectors are sized
// types, as the register-tiled kernels need): whether `target` has code for
// `bits` (the manifest's sve column). A host whose length is another one
// cannot run that target.
bool SveTargetHasLength(TargetId target, int bits);
const TargetInfo& TargetInfoOf(TargetId id);
// Why this host cannot run `target`, in words ("" when it can).
std::string WhyHostCannotRun(const HostFeatures& features, TargetId target);
const HostFeatures& DetectHost();

// Whether a host with `features` can run `target`.
bool HostCanRun(const HostFeatures& features, TargetId target);
bool HostCanRun(TargetId target);  // this host
// Targets this host can run, best first.
std::vector<TargetId> RunnableTargets();

}  // namespace fcb
