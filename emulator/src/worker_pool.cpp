#include "npusim/emulator/worker_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

namespace npusim::emulator {

WorkerPool::WorkerPool(int threads) {
  for (int k = 1; k < threads; ++k) helpers_.emplace_back([this] { help(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

int WorkerPool::threads_for(int cores) {
  if (const char* setting = std::getenv("NPUSIM_THREADS"); setting && *setting)
    return std::clamp(std::atoi(setting), 1, std::max(cores, 1));
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::max(cores, 1));
}

void WorkerPool::run(size_t count, const std::function<void(size_t)>& task) {
  if (helpers_.empty() || count <= 1) {
    for (size_t k = 0; k < count; ++k) task(k);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    count_ = count;
    next_ = 0;
    working_ = helpers_.size() + 1;
    error_ = nullptr;
    ++batch_;
  }
  wake_.notify_all();
  work();
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return working_ == 0; });
  task_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

// Takes tasks until none is left, then reports this thread done.
void WorkerPool::work() {
  while (true) {
    size_t k = 0;
    {
      std::lock_guard lock(mutex_);
      if (next_ == count_) break;
      k = next_++;
    }
    try {
      (*task_)(k);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  std::lock_guard lock(mutex_);
  if (--working_ == 0) finished_.notify_all();
}

void WorkerPool::help() {
  unsigned long long seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || batch_ != seen; });
      if (stopping_) return;
      seen = batch_;
    }
    work();
  }
}

}  // namespace npusim::emulator
