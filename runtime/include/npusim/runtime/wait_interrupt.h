// Host threads waiting for a device (synchronising calls, copies to the host, events, process exit) can be asked to
// stop waiting: Ctrl-C in Python. Each waiting thread calls the process's check every few tens of milliseconds,
// without the device's lock; the check stops the wait by throwing, and the device then abandons its unfinished work
// (Device::abandon_work), so that what the host gave up on neither keeps the device busy nor passes for a result.
#pragma once

#include <chrono>
#include <functional>

namespace npusim::runtime {

inline constexpr std::chrono::milliseconds kWaitInterruptPeriod{50};

// Replaces the process's check; an empty function (the default) makes waits uninterruptible.
void set_wait_interrupt_check(std::function<void()> check);
// Runs the check, if any, on the calling thread; whatever it throws propagates.
void check_wait_interrupt();

}  // namespace npusim::runtime
