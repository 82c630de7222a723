// Hands ImportOnnx to the ir-level hook (ir/importer.h), two ways:
// - linked into a program with the other layers (unit tests, fcb-conformance):
//   registered when this object is initialized;
// - as the plugin libfcb_onnx.so: libfcb calls the exported C entry point
//   below and registers the function in its own copy of the hook (the plugin's
//   private copy of ir, which the static registration reaches, is not libfcb's).
#include <cstring>
#include <type_traits>

#include "import/onnx_import.h"

namespace fcb::import {
namespace {

const bool g_registered = [] {
  ir::RegisterOnnxImporter(&ImportOnnx);
  return true;
}();

}  // namespace
}  // namespace fcb::import

extern "C" __attribute__((visibility("default"))) fcb::ir::OnnxImportFn fcb_onnx_importer_v1(
    const char* fcb_version) {
  static_assert(std::is_same_v<decltype(&fcb_onnx_importer_v1), fcb::ir::OnnxPluginEntryFn>);
  if (!fcb_version || std::strcmp(fcb_version, FCB_VERSION) != 0) return nullptr;
  return &fcb::import::ImportOnnx;
}
