// Registers ImportOnnx with the ir-level hook (ir/importer.h) when this layer
// is loaded: as the plugin libfcb_onnx.so, or linked into a program.
#include "import/onnx_import.h"

namespace fcb::import {
namespace {

const bool g_registered = [] {
  ir::RegisterOnnxImporter(&ImportOnnx);
  return true;
}();

}  // namespace
}  // namespace fcb::import
