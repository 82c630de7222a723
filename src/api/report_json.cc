// The JSON form of a CompileReport (fcb/fcb.h), the one every front end
// returns: the C API's fcb_compile report and the Python fcb.compile() report.
#include <nlohmann/json.hpp>

#include "fcb/fcb.h"

namespace fcb {

std::string CompileReportJson(const CompileReport& r, int indent) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["file_size"] = r.file_size;
  j["warnings"] = r.warnings;
  j["int8_accuracy"] = ordered_json::array();
  for (const auto& a : r.int8_accuracy) {
    ordered_json aj;
    aj["method"] = a.method;
    aj["target"] = a.target;
    aj["on_int8_target"] = a.on_int8_target;
    aj["int8_targets"] = a.int8_targets;
    aj["inputs"] = a.inputs;
    aj["float_outputs"] = a.float_outputs;
    // NaN (not measured) has no JSON form: null, with the error beside it.
    if (a.error.empty()) aj["rel_l2"] = a.rel_l2;
    else aj["rel_l2"] = nullptr;
    aj["error"] = a.error;
    j["int8_accuracy"].push_back(aj);
  }
  // Names and messages come from model files: invalid UTF-8 is replaced, never thrown on.
  return j.dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fcb
