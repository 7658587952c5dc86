// Emitted kernels in the SystemC model against the emulator: indexed moves, fused attention, optimizer steps,
// random numbers, row kernels, gathers and losses must leave identical device memory in both modes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "npusim/emitter/attention.h"
#include "npusim/emitter/gather.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/nll_loss.h"
#include "npusim/emitter/random.h"
#include "npusim/emitter/rows.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

// A kernel whose argument block is `count` 8 KiB buffers, all filled with the same float pattern first; returns the
// buffers' contents afterwards.
std::vector<float> run_with_buffers(runtime::Device& device, const emitter::Kernel& kernel, int count) {
  std::vector<uint64_t> buffers;
  std::vector<float> data(2048);
  for (size_t k = 0; k < data.size(); ++k) data[k] = 0.03f * static_cast<float>(k % 89) - 1.1f;
  for (int k = 0; k < count; ++k) {
    buffers.push_back(device.allocate(8192));
    device.copy_host_to_device(buffers.back(), data.data(), 8192);
  }
  device.launch(kernel.name, device.load_program(kernel.words), buffers, (uint64_t{1} << kernel.cores) - 1);
  std::vector<float> contents(2048 * count);
  for (int k = 0; k < count; ++k) device.copy_device_to_host(contents.data() + 2048 * k, buffers[k], 8192);
  for (uint64_t buffer : buffers) device.free(buffer);
  return contents;
}

// Gather, scatter and scatter-add kernels over 2 cores, with repeated int32 indices, wrapped negative ones for two of
// them: the same memory in both modes.
TEST(TimedModel, IndexedElementKernelsLeaveTheSameMemoryAsTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  const auto run = [&](runtime::Device& device, const emitter::IndexedElementsSpec& spec) {
    const emitter::Kernel kernel = emitter::emit_indexed_elements(spec, config);
    std::vector<float> data(2048), values(2048);
    for (size_t k = 0; k < data.size(); ++k) {
      data[k] = 0.5f * static_cast<float>(k);
      values[k] = 1.0f / static_cast<float>(k + 3);
    }
    std::vector<int32_t> indices(2048);
    for (size_t k = 0; k < indices.size(); ++k)
      indices[k] = static_cast<int32_t>((k * 7) % spec.dim_size) - (spec.wrap_negative ? 3 : 0);
    const uint64_t data_buffer = device.allocate(8192), index_buffer = device.allocate(8192),
                   values_buffer = device.allocate(8192);
    device.copy_host_to_device(data_buffer, data.data(), 8192);
    device.copy_host_to_device(index_buffer, indices.data(), 8192);
    device.copy_host_to_device(values_buffer, values.data(), 8192);
    const uint64_t arguments[] = {data_buffer, index_buffer, values_buffer};
    device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
    device.copy_device_to_host(data.data(), data_buffer, 8192);
    device.copy_device_to_host(values.data(), values_buffer, 8192);
    data.insert(data.end(), values.begin(), values.end());
    return data;
  };
  for (const emitter::IndexedMove move :
       {emitter::IndexedMove::Gather, emitter::IndexedMove::Scatter, emitter::IndexedMove::ScatterAdd}) {
    emitter::IndexedElementsSpec spec;  // data 6 x 40 x 5, index and values 6 x 50 x 5 (repeated indices)
    spec.move = move;
    spec.outer = 6;
    spec.positions = 50;
    spec.inner = 5;
    spec.dim_size = 40;
    spec.data = {200, 5, 1};
    spec.index = spec.values = {250, 5, 1};
    spec.index_bytes = 4;
    spec.wrap_negative = move != emitter::IndexedMove::Scatter;
    EXPECT_EQ(run(functional, spec), run(timed, spec)) << static_cast<int>(move);
  }
}

// Fused attention, causal and not, with ragged blocks and chunked head and value dimensions on an 8 x 8 array: the
// same output and log-sum-exp bits in both modes, and engines that never race.
TEST(TimedModel, AttentionKernelsLeaveTheSameMemoryAsTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  config.core_systolic_rows = config.core_systolic_cols = 8;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  for (bool causal : {false, true})
    for (isa::ElementType type : {isa::ElementType::F32, isa::ElementType::BF16}) {
      // 2 heads of 19 queries and 13 keys, head dimension 12, value dimension 10: buffers 2-4 hold Q, K, V; for
      // bfloat16, values between -1.1 and 1.5 (the upper halves of floats) in every 16-bit element.
      const emitter::Kernel kernel = emitter::emit_attention({2, 19, 13, 12, 10, causal, 0.3f, type}, config);
      const auto run = [&](runtime::Device& device) {
        if (type == isa::ElementType::F32) return run_with_buffers(device, kernel, 5);
        std::vector<uint16_t> values(4096);
        for (size_t k = 0; k < values.size(); ++k)
          values[k] = static_cast<uint16_t>(std::bit_cast<uint32_t>(0.03f * static_cast<float>(k % 89) - 1.1f) >> 16);
        std::vector<uint64_t> buffers;
        for (int b = 0; b < 5; ++b) {
          buffers.push_back(device.allocate(8192));
          device.copy_host_to_device(buffers.back(), values.data(), 8192);
        }
        device.launch(kernel.name, device.load_program(kernel.words), buffers, (uint64_t{1} << kernel.cores) - 1);
        std::vector<float> contents(2048 * 2);
        for (int b = 0; b < 2; ++b) device.copy_device_to_host(contents.data() + 2048 * b, buffers[b], 8192);
        for (uint64_t buffer : buffers) device.free(buffer);
        return contents;
      };
      const std::vector<float> expected = run(functional);
      EXPECT_EQ(expected, run(timed)) << kernel.name << causal;
      EXPECT_FALSE(std::isnan(expected[0])) << kernel.name;
      for (const runtime::CommandRecord& record : timed.take_records())
        EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
    }
  // Four held key blocks of 8 (the exact softmax's passes), a causal query block skipping some of them.
  for (bool causal : {false, true}) {
    const emitter::Kernel kernel = emitter::emit_attention({2, 30, 29, 6, 5, causal, 0.5f}, config);
    ASSERT_NE(kernel.description.find("every key block held"), std::string::npos) << kernel.description;
    const std::vector<float> expected = run_with_buffers(functional, kernel, 5);
    EXPECT_EQ(expected, run_with_buffers(timed, kernel, 5)) << causal;
    for (const runtime::CommandRecord& record : timed.take_records())
      EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
  }
}

TEST(TimedModel, RandomKernelsLeaveTheSameMemoryAsTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  for (emitter::RandomOp op : {emitter::RandomOp::Uniform, emitter::RandomOp::Normal, emitter::RandomOp::Bernoulli,
                               emitter::RandomOp::Dropout}) {
    // 1000 elements of output in buffer 0, the dropout input in buffer 1 and its mask in buffer 2; the remaining
    // argument words (key, position, parameters) are the addresses of buffers 3 to 6, arbitrary but the same.
    const emitter::Kernel kernel = emitter::emit_random({op, 1000}, config);
    EXPECT_EQ(run_with_buffers(functional, kernel, 7), run_with_buffers(timed, kernel, 7)) << kernel.name;
    for (const runtime::CommandRecord& record : timed.take_records())
      EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
  }
}

TEST(TimedModel, LayerNormKernelLeavesTheSameMemoryAsTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  for (const bool affine : {true, false}) {
    const emitter::Kernel kernel =
        emitter::emit_rows({emitter::RowOp::LayerNormF32, 24, 80, affine, affine, 1e-5f}, config);
    EXPECT_EQ(run_with_buffers(functional, kernel, 6), run_with_buffers(timed, kernel, 6));
    const runtime::CommandRecord record = kernel_record(timed.take_records(), kernel.name);
    EXPECT_EQ(record.stats.hazards, 0u) << record.first_hazard;
  }
}

TEST(TimedModel, GatherKernelMatchesTheEmulatorAndTrapsOnABadIndex) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  const emitter::Kernel kernel = emitter::emit_gather({64, 24, 5, 8}, config);  // 5 rows of 24 bytes from 64
  const auto run = [&](runtime::Device& device, int64_t last_index) {
    std::vector<float> table(64 * 6);
    for (size_t k = 0; k < table.size(); ++k) table[k] = static_cast<float>(k) * 0.5f;
    const int64_t indices[] = {63, 0, 17, 17, last_index};
    const uint64_t out = device.allocate(5 * 24), rows = device.allocate(table.size() * 4), index = device.allocate(40);
    device.copy_host_to_device(rows, table.data(), table.size() * 4);
    device.copy_host_to_device(index, indices, sizeof indices);
    const uint64_t arguments[] = {out, rows, index};
    device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
    std::vector<float> result(5 * 6);
    device.copy_device_to_host(result.data(), out, result.size() * 4);
    return result;
  };
  const std::vector<float> gathered = run(functional, 2);
  EXPECT_EQ(gathered, run(timed, 2));
  EXPECT_EQ(gathered[0], 63 * 6 * 0.5f);
  EXPECT_EQ(gathered[4 * 6 + 1], (2 * 6 + 1) * 0.5f);
  for (runtime::Device* device : {&functional, &timed}) EXPECT_THROW(run(*device, 64), runtime::DeviceError);
}

// Weighted mean nll_loss over 4 rows of 3 classes, one row ignored, then its gradient: the same bits in both modes,
// and the loss by hand: -(w[2] x[0][2] + w[0] x[1][0] + w[1] x[3][1]) / (w[2] + w[0] + w[1]).
TEST(TimedModel, NllLossKernelsMatchTheEmulatorAndAHandComputedLoss) {
  const emitter::NllLossSpec spec{4, 3, true, emitter::NllReduction::Mean, -100};
  const emitter::Kernel forward = emitter::emit_nll_loss(spec, test_config());
  const emitter::Kernel backward = emitter::emit_nll_loss_backward(spec, test_config());
  const float input[12] = {-1, -2, -0.5f, -3, -0.25f, -4, -1, -1, -1, -2, -0.75f, -8};
  const int64_t targets[4] = {2, 0, -100, 1};
  const float weights[3] = {0.5f, 2, 4}, grad_output = 3;
  const auto run = [&](runtime::Device& device) {
    const uint64_t loss = device.allocate(8), total = device.allocate(8), x = device.allocate(48),
                   t = device.allocate(32), w = device.allocate(12), grad = device.allocate(4),
                   dx = device.allocate(48);
    device.copy_host_to_device(x, input, sizeof input);
    device.copy_host_to_device(t, targets, sizeof targets);
    device.copy_host_to_device(w, weights, sizeof weights);
    device.copy_host_to_device(grad, &grad_output, 4);
    const std::vector<float> zeros(12, 0.0f);
    device.copy_host_to_device(dx, zeros.data(), 48);
    const uint64_t forward_arguments[] = {loss, total, x, t, w}, backward_arguments[] = {dx, grad, t, w, total};
    device.launch(forward.name, device.load_program(forward.words), forward_arguments);
    device.launch(backward.name, device.load_program(backward.words), backward_arguments);
    std::vector<float> result(14);
    device.copy_device_to_host(result.data(), loss, 4);
    device.copy_device_to_host(&result[1], total, 4);
    device.copy_device_to_host(&result[2], dx, 48);
    return result;
  };
  runtime::Device functional(test_config(), runtime::Mode::Functional);
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const std::vector<float> result = run(functional);
  EXPECT_EQ(result, run(timed));
  EXPECT_FLOAT_EQ(result[0], (4 * 0.5f + 0.5f * 3 + 2 * 0.75f) / 6.5f);
  EXPECT_EQ(result[1], 6.5f);
  EXPECT_FLOAT_EQ(result[2 + 2], -4 * 3 / 6.5f);          // row 0, class 2
  EXPECT_FLOAT_EQ(result[2 + 3 * 3 + 1], -2 * 3 / 6.5f);  // row 3, class 1
  EXPECT_EQ(result[2 + 6], 0.0f);                         // the ignored row has no gradient
}

}  // namespace
}  // namespace npusim
