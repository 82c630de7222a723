#include "ir/importer.h"

#include <atomic>

namespace fcb::ir {
namespace {
std::atomic<OnnxImportFn> g_importer{nullptr};
}  // namespace

void RegisterOnnxImporter(OnnxImportFn fn) { g_importer.store(fn, std::memory_order_release); }

OnnxImportFn RegisteredOnnxImporter() { return g_importer.load(std::memory_order_acquire); }

}  // namespace fcb::ir
