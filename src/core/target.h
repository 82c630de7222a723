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

enum class TargetId : uint8_t {
  kGeneric = 0,   // portable scalar code, runs anywhere
  kX86_64_V2 = 1, // SSE4.2 (+POPCNT, SSSE3)
  kX86_64_V3 = 2, // AVX2 + FMA (+BMI1/2, F16C, LZCNT, MOVBE)
  kX86_64_V4 = 3, // AVX-512 F/BW/CD/DQ/VL
};

struct TargetInfo {
  TargetId id;
  const char* name;         // stable name used in specs and files
  const char* description;  // human words for `fcb targets`
  int score;                // higher = preferred when the host can run it
};

// Every target the compiler knows, in a fixed order (generic first).
const std::vector<TargetInfo>& KnownTargets();
std::optional<TargetId> TargetFromName(std::string_view name);
const char* TargetName(TargetId id);
std::string KnownTargetNames();  // "generic, x86-64-v2, x86-64-v3, x86-64-v4"

// What the CPU reports and what the OS has enabled (XCR0 for the AVX and
// AVX-512 register state). Filled once per process; pure data.
struct HostFeatures {
  bool sse42 = false, popcnt = false, ssse3 = false;
  bool avx = false, avx2 = false, fma = false, bmi1 = false, bmi2 = false, f16c = false,
       lzcnt = false, movbe = false;
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false, avx512vl = false;
  bool os_avx = false;     // XCR0 bits 1,2 (SSE, AVX state)
  bool os_avx512 = false;  // XCR0 bits 5,6,7 (opmask, ZMM_Hi256, Hi16_ZMM)
};
const HostFeatures& DetectHost();

// Whether a host with `features` can run `target`.
bool HostCanRun(const HostFeatures& features, TargetId target);
bool HostCanRun(TargetId target);  // this host
// Targets this host can run, best first.
std::vector<TargetId> RunnableTargets();

}  // namespace fcb
