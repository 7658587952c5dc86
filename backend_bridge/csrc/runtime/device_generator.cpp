// DeviceGenerator and the per-device default generators.
#include "device_generator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "npusim/runtime/session.h"

namespace npusim::bridge {

DeviceGenerator::DeviceGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl({c10::DeviceType::PrivateUse1, device}, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void DeviceGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t DeviceGenerator::seed() {
  const uint64_t fresh = c10::detail::getNonDeterministicRandom();
  set_current_seed(fresh);
  return fresh;
}

void DeviceGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.device().is_cpu() && state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16,
              "npusim: a generator state is a CPU uint8 tensor of 16 bytes (seed, offset), not ", state.numel(),
              " elements of ", state.dtype().name(), " on ", state.device());
  const auto* bytes = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, bytes, 8);
  std::memcpy(&offset_, bytes + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> DeviceGenerator::get_state() const {
  at::Tensor state =
      at::detail::empty_cpu({16}, c10::ScalarType::Byte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

DeviceGenerator::Draw DeviceGenerator::reserve(uint64_t count) {
  std::lock_guard lock(mutex_);
  return {seed_, std::exchange(offset_, offset_ + count)};
}

DeviceGenerator* DeviceGenerator::clone_impl() const {
  auto* copy = new DeviceGenerator(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::once_flag created;
  static std::deque<at::Generator> generators;  // a deque: references stay valid
  std::call_once(created, [] {
    const int count = runtime::Session::instance().device_count();
    for (int k = 0; k < count; ++k) generators.push_back(new_generator(static_cast<c10::DeviceIndex>(k)));
  });
  if (index < 0) index = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  TORCH_CHECK(index >= 0 && index < static_cast<c10::DeviceIndex>(generators.size()), "npusim: device ",
              static_cast<int>(index), " does not exist; there are ", generators.size());
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex index) { return at::make_generator<DeviceGenerator>(index); }

DeviceGenerator& generator_for(const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  const at::Generator& chosen = generator.has_value() && generator->defined() ? *generator : default_generator(device);
  auto* impl = dynamic_cast<DeviceGenerator*>(chosen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "npusim: a random op on an npusim tensor needs an npusim generator, not one for ",
              chosen.device());
  return *impl;
}

}  // namespace npusim::bridge
