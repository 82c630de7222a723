// Finds the ONNX importer: already registered (linked in), or the plugin
// libfcb_onnx.so that lies beside libfcb.so, loaded once (see ir/importer.h).
#pragma once

#include "fcb/status.h"
#include "ir/importer.h"

namespace fcb::compile {

// Errors: NotFound naming the plugin path and the loader's reason.
Result<ir::OnnxImportFn> OnnxImporter();

}  // namespace fcb::compile
