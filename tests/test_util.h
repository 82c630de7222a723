// Helpers shared by the tests: temporary folders, running the CLI, comparing
// tensors against an oracle.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fcb/npy.h"
#include "fcb/status.h"

namespace fcb::testing {

// Folder holding exported models, inputs and ONNX Runtime reference outputs,
// made by scripts/prepare_testdata.sh.
std::string TestDataDir();
std::string CliPath();

// A fresh folder under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;   // exit status, or 128 + signal number when killed by a signal
  std::string out, err;
};
// Runs `cmd` through /bin/sh, capturing stdout and stderr.
CommandResult RunCommand(const std::string& cmd);

struct PlanStep {
  std::string op, node;
};
// The steps of `fcb_file`'s plan for the host's target, in order (one run of
// `fcb profile --json`); empty, with a test failure, if that fails.
std::vector<PlanStep> PlanSteps(const std::string& fcb_file);

struct Diff {
  double rel_l2 = 0;   // ||a - b|| / max(||b||, tiny)
  double max_abs = 0;  // max |a - b|
  bool shape_equal = true;
};
Diff Compare(const std::vector<float>& got, const std::vector<float>& want);

// Whether `s` is a refusal with `code` whose message contains `phrase` (a
// phrase that names what was refused). Use through EXPECT_REFUSED / ASSERT_REFUSED.
::testing::AssertionResult IsRefused(const Status& s, StatusCode code, std::string_view phrase);
template <typename T>
::testing::AssertionResult IsRefused(const Result<T>& r, StatusCode code, std::string_view phrase) {
  if (r.ok()) return ::testing::AssertionFailure() << "succeeded; want " << StatusCodeName(code) << " with \"" << phrase << "\"";
  return IsRefused(r.status(), code, phrase);
}

bool FileExists(const std::string& path);
// Every DIR/NAME.npy as NAME -> array (empty when DIR does not exist); a file
// that does not read is a test failure. The CASE.feeds / CASE.ref folders of
// scripts/prepare_testdata.sh.
std::map<std::string, NpyArray> ReadNpyFolder(const std::string& dir);
std::vector<uint8_t> ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace fcb::testing

// `expr` (a Status or a Result) fails with `code` and a message containing `phrase`.
#define EXPECT_REFUSED(expr, code, phrase) EXPECT_TRUE(::fcb::testing::IsRefused((expr), (code), (phrase)))
#define ASSERT_REFUSED(expr, code, phrase) ASSERT_TRUE(::fcb::testing::IsRefused((expr), (code), (phrase)))
