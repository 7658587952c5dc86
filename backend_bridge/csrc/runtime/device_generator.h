// The npusim random number generator: a seed (the key of the chip's Philox stream) and an offset (the next unused
// stream position). A random kernel reserves as many positions as it draws numbers, so successive calls never reuse
// numbers and a run is reproducible from its seed. One default generator per device, like CUDA's.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace npusim::bridge {

class DeviceGenerator final : public c10::GeneratorImpl {
 public:
  explicit DeviceGenerator(c10::DeviceIndex device);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;  // a fresh non-deterministic seed, returned
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  // The state is 16 bytes in a CPU uint8 tensor: the seed, then the offset (little-endian 64-bit words).
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The key and the first of `count` stream positions, reserved under the generator's mutex.
  struct Draw {
    uint64_t key, first_position;
  };
  Draw reserve(uint64_t count);

 private:
  DeviceGenerator* clone_impl() const override;

  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

// The default generator of device `index` (the current device for -1).
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

// The generator a random op draws from: the one passed, which must be an npusim generator, or the device's default.
DeviceGenerator& generator_for(const std::optional<at::Generator>& generator, c10::DeviceIndex device);

}  // namespace npusim::bridge
