// FCB_API marks what libfcb.so exports. The library is built with
// -fvisibility=hidden (and -fvisibility-inlines-hidden), so everything else it
// holds (the compiler, the kernels, the file format, its dependencies) stays
// internal: `nm -D --defined-only libfcb.so` lists only these declarations
// (tests/check_exports.sh checks it).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FCB_API [[gnu::visibility("default")]]
// A member of an exported class that is not part of the API (a private
// constructor taking an implementation type).
#define FCB_INTERNAL [[gnu::visibility("hidden")]]
#else
#define FCB_API
#define FCB_INTERNAL
#endif
