#include "test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fcb::testing {

::testing::AssertionResult IsRefused(const Status& s, StatusCode code, std::string_view phrase) {
  if (s.ok()) return ::testing::AssertionFailure() << "succeeded; want " << StatusCodeName(code) << " with \"" << phrase << "\"";
  if (s.code() != code || s.message().find(phrase) == std::string::npos)
    return ::testing::AssertionFailure() << "refused with " << StatusCodeName(s.code()) << " \"" << s.message()
                                         << "\"; want " << StatusCodeName(code) << " with \"" << phrase << "\"";
  return ::testing::AssertionSuccess() << StatusCodeName(s.code()) << " \"" << s.message() << "\"";
}

std::string TestDataDir() {
  const char* env = std::getenv("FCB_TESTDATA_DIR");
  return env ? env : FCB_TESTDATA_DIR;
}

std::string CliPath() {
  const char* env = std::getenv("FCB_CLI");
  return env ? env : FCB_CLI_PATH;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/fcb_test_XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

static std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::vector<PlanStep> PlanSteps(const std::string& fcb_file) {
  std::vector<PlanStep> steps;
  const auto prof = RunCommand(CliPath() + " profile '" + fcb_file + "' --iterations 1 --json");
  EXPECT_EQ(prof.exit_code, 0) << prof.err;
  const auto j = nlohmann::json::parse(prof.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << prof.out;
  if (prof.exit_code != 0 || j.is_discarded() || !j.contains("steps")) return steps;
  for (const auto& s : j["steps"]) steps.push_back({s["op"].get<std::string>(), s["node"].get<std::string>()});
  return steps;
}

CommandResult RunCommand(const std::string& cmd) {
  TempDir tmp;
  const std::string out = tmp.File("out"), err = tmp.File("err");
  const std::string full = "(" + cmd + ") >'" + out + "' 2>'" + err + "' </dev/null";
  const int status = std::system(full.c_str());
  CommandResult r;
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

Diff Compare(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  if (got.size() != want.size()) {
    d.shape_equal = false;
    d.rel_l2 = d.max_abs = INFINITY;
    return d;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    if (std::isnan(e)) {
      d.rel_l2 = d.max_abs = INFINITY;
      return d;
    }
    num += e * e;
    den += static_cast<double>(want[i]) * want[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
  }
  d.rel_l2 = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  return d;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::map<std::string, NpyArray> ReadNpyFolder(const std::string& dir) {
  std::map<std::string, NpyArray> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".npy") continue;
    auto a = ReadNpy(e.path().string());
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) out[e.path().stem().string()] = std::move(a).value();
  }
  return out;
}

}  // namespace fcb::testing
