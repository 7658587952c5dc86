#include "npusim/runtime/wait_interrupt.h"

#include <memory>
#include <mutex>

namespace npusim::runtime {

namespace {
std::mutex check_mutex;
std::shared_ptr<const std::function<void()>> installed_check;
}  // namespace

void set_wait_interrupt_check(std::function<void()> check) {
  auto installed = check ? std::make_shared<const std::function<void()>>(std::move(check)) : nullptr;
  std::lock_guard lock(check_mutex);
  installed_check = std::move(installed);
}

void check_wait_interrupt() {
  std::shared_ptr<const std::function<void()>> check;
  {
    std::lock_guard lock(check_mutex);
    check = installed_check;
  }
  // Called outside the mutex: the check may block (on Python's GIL), and another waiting thread may hold what it needs.
  if (check) (*check)();
}

}  // namespace npusim::runtime
