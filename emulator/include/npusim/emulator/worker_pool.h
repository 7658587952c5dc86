// A fixed set of host threads that run a batch of tasks and wait for all of them: the functional chip emulates its
// cores in parallel with it. The calling thread works too, so a pool of one thread runs everything inline.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace npusim::emulator {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs task(0) .. task(count - 1), in any order and in parallel, and returns when all are done. An exception
  // from a task is rethrown here (the first one, if several throw).
  void run(size_t count, const std::function<void(size_t)>& task);

  // Host threads for `cores` emulated cores: NPUSIM_THREADS if set (1 runs the cores one after another), else the
  // host's hardware threads, at most one per core.
  static int threads_for(int cores);

 private:
  void help();
  void work();

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0, next_ = 0, working_ = 0;
  unsigned long long batch_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace npusim::emulator
