// Helpers shared by the tests: temporary folders, running the CLI, comparing
// tensors against an oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

bool FileExists(const std::string& path);
std::vector<uint8_t> ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace fcb::testing
