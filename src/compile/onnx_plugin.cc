#include "compile/onnx_plugin.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace fcb::compile {
namespace {

constexpr char kPluginName[] = "libfcb_onnx.so";

// The folder of the shared object that holds this function (libfcb.so), with
// a trailing slash; empty if unknown.
std::string OwnFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&OwnFolder), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

Result<ir::OnnxImportFn> OnnxImporter() {
  if (ir::OnnxImportFn fn = ir::RegisteredOnnxImporter()) return fn;
  static std::mutex mu;
  static std::string error;  // the first failure, reported to every later call
  std::lock_guard<std::mutex> lock(mu);
  if (ir::OnnxImportFn fn = ir::RegisteredOnnxImporter()) return fn;
  if (error.empty()) {
    const std::string path = OwnFolder() + kPluginName;
    // RTLD_NODELETE: the importer's static state lives until exit, whatever
    // the caller does with the handle (it keeps none).
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) {
      const char* why = dlerror();
      error = "the ONNX importer plugin '" + path + "' could not be loaded (" +
              (why ? why : "unknown reason") + "); it is built and installed beside libfcb.so";
    } else {
      auto entry = reinterpret_cast<ir::OnnxPluginEntryFn>(dlsym(handle, ir::kOnnxPluginEntry));
      ir::OnnxImportFn fn = entry ? entry(FCB_VERSION) : nullptr;
      if (!entry)
        error = "the ONNX importer plugin '" + path + "' has no entry point " + ir::kOnnxPluginEntry;
      else if (!fn)
        error = "the ONNX importer plugin '" + path + "' was built for another fcb version than " FCB_VERSION;
      else
        ir::RegisterOnnxImporter(fn);
    }
  }
  if (ir::OnnxImportFn fn = ir::RegisteredOnnxImporter()) return fn;
  return NotFound(error);
}

}  // namespace fcb::compile
