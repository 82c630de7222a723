// The weight pool's checksum, computed off the load path.
//
// Loading a 54 MB program spends ~4.5 ms reading its pool at one core's memory
// bandwidth just to checksum it, longer than everything else the load does.
// So the loader checks synchronously only what can steer control flow or
// addressing (every blob of an integer or boolean tensor, and every constant
// small enough to be read while kernels are prepared), and hashes the whole
// pool on a background thread while the caller creates executions and runs.
// No run reports success before that hash has matched: Execution::Run waits
// for it, and a mismatch fails every run with CorruptFile (outputs of such a
// run must not be used). Float weights can only make such a run's numbers
// wrong, never its memory accesses.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fcb/status.h"
#include "format/fcb_file.h"

namespace fcb {

class PoolCheck {
 public:
  PoolCheck() = default;
  PoolCheck(const PoolCheck&) = delete;
  PoolCheck& operator=(const PoolCheck&) = delete;
  ~PoolCheck();  // waits for the hash (a few ms at most)

  // Starts checking `file`'s pool (which must outlive this object); if no
  // thread can be started, checks it on the calling thread before returning.
  void Start(const format::LoadedFile* file);
  // Blocks until the check is done; its result (cached).
  Status Wait() const;

 private:
  void Finish(Status s);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = true;  // until Start: nothing to check (verification off)
  Status status_;
  std::atomic<bool> passed_{true};  // fast path for every later run
  std::thread thread_;
};

}  // namespace fcb
