// Shared by the fuzz targets (fuzz/*.cc): a private scratch folder per
// process for the parsers that read paths, and the replay driver's contract.
//
// Every target defines LLVMFuzzerTestOneInput. Built with clang and
// -fsanitize=fuzzer (FCB_FUZZ) it is a libFuzzer program; built with
// fuzz/replay_main.cc (every build with tests) it is a plain program that
// runs each file it is given once, which is how ctest replays the kept
// findings (fuzz/regressions/) and the seeds.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fcb::fuzz {

// A folder made on first use under $TMPDIR (else /dev/shm, else /tmp),
// removed with its files at exit.
class ScratchDir {
 public:
  static ScratchDir& Get() {
    static ScratchDir d;
    return d;
  }
  // `name` inside the folder.
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `size` bytes to `name` in the folder; false (after a message) if
  // the OS refuses, which is the machine's problem, not the input's.
  bool Write(const std::string& name, const uint8_t* data, size_t size) const {
    const std::string p = Path(name);
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (!f) return false;
    const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size);
    return std::fclose(f) == 0 && ok;
  }
  ~ScratchDir() {
    if (dir_.empty()) return;
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }

 private:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string b = base && *base ? base : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    std::string templ = b + "/fcb-fuzz-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir_ = templ;
  }
  std::string dir_;
};

}  // namespace fcb::fuzz
