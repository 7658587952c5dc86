// Tensor creation, views, resizing and copies for npusim tensors. Data never moves through host pointers to device
// memory: copies are commands to the device's firmware or emitted copy kernels.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "bridge.h"
#include "outermost_dimension.h"
#include "runtime/device_pointers.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

std::optional<isa::ElementType> element_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return isa::ElementType::F32;
    case at::kHalf: return isa::ElementType::F16;
    case at::kBFloat16: return isa::ElementType::BF16;
    case at::kChar: return isa::ElementType::I8;
    case at::kByte: return isa::ElementType::U8;
    case at::kInt: return isa::ElementType::I32;
    case at::kLong: return isa::ElementType::I64;
    case at::kBool: return isa::ElementType::Bool;
    default: return std::nullopt;
  }
}

namespace {

c10::DispatchKeySet npusim_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

at::ScalarType chosen_dtype(std::optional<at::ScalarType> dtype) {
  return dtype.value_or(c10::get_default_dtype_as_scalartype());
}

c10::DeviceIndex chosen_index(std::optional<c10::Device> device) {
  if (device && device->has_index()) return device->index();
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();  // the current device
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, chosen_index(device)));
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), npusim_keys(),
                                   chosen_dtype(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, chosen_index(device)));
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), npusim_keys(),
                                           chosen_dtype(dtype));
}

// Like at::native::resize_: an unchanged size keeps the tensor's strides (so views written back by the CPU
// fallback stay views); a new size makes it contiguous and grows the storage if needed.
const at::Tensor& resize_tensor(const at::Tensor& self, c10::IntArrayRef size,
                                std::optional<c10::MemoryFormat> memory_format) {
  if (self.sizes() == size && !memory_format) return self;
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(*memory_format);
  const size_t bytes =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(), self.storage_offset());
  if (bytes > self.storage().nbytes()) {
    const c10::DeviceGuard guard(self.device());
    resize_storage_bytes(self.storage(), bytes);
  }
  return self;
}

// Tensor.set_(storage, offset, size, stride), as the CPU's: PyTorch's argument checks, no stride meaning contiguous,
// and a storage too small for the view grown to fit it.
at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, stride);
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storage_offset);
  if (stride.data()) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  const size_t bytes =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(), storage_offset);
  if (self.numel() > 0 && bytes > self.storage().nbytes()) {
    const c10::DeviceGuard guard(self.device());
    resize_storage_bytes(self.storage(), bytes);
  }
  return self;
}

at::Tensor& set_whole_storage(at::Tensor& self, c10::Storage source) {
  const int64_t elements = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {elements}, {1});
}

// Moving a parameter between the CPU and npusim in place (Module::to in C++ uses set_data) needs the two dense layouts
// to count as compatible; PyTorch's own check only knows its in-tree backends.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto dense_here = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense_here(self) && dense_here(from));
}

at::Scalar local_scalar_dense(const at::Tensor& self) { return at::_local_scalar_dense(self.cpu()); }

bool plainly_contiguous(const at::Tensor& tensor) {
  return tensor.is_contiguous() && tensor.is_non_overlapping_and_dense();
}

void copy_host_to_device(const at::Tensor& source, const at::Tensor& destination) {
  const at::Tensor host = source.to(destination.scalar_type()).expand_as(destination).contiguous();
  if (plainly_contiguous(destination)) {
    runtime_device(destination).copy_host_to_device(device_address(destination), host.const_data_ptr(), host.nbytes());
    return;
  }
  const at::Tensor staging = at::empty(destination.sizes(), destination.options());
  runtime_device(staging).copy_host_to_device(device_address(staging), host.const_data_ptr(), host.nbytes());
  copy_on_device(staging, destination);
}

void copy_device_to_host(const at::Tensor& source, const at::Tensor& destination) {
  at::Tensor dense = source;
  if (!plainly_contiguous(source)) {
    dense = at::empty(source.sizes(), source.options());
    copy_on_device(source, dense);
  }
  at::Tensor host = at::empty(dense.sizes(), dense.options().device(c10::kCPU));
  runtime_device(dense).copy_device_to_host(host.mutable_data_ptr(), device_address(dense), host.nbytes());
  destination.copy_(host);
}

// The element types vcvt converts between: those the vector engine computes in, and float64, which it only converts.
std::optional<isa::ElementType> conversion_type(at::ScalarType type) {
  if (type == at::kDouble) return isa::ElementType::F64;
  return element_type(type);
}

// Converts `source` into `destination` (same shape, other dtype) with a vcvt kernel. PyTorch wraps integers that do
// not fit a narrower integer type where the ISA saturates, so those conversions are not native (false).
bool convert_on_device(const at::Tensor& source, const at::Tensor& destination) {
  const auto from = conversion_type(source.scalar_type()), to = conversion_type(destination.scalar_type());
  if (!from || !to) return false;
  const bool integer_from = at::isIntegralType(source.scalar_type(), false),
             integer_to = at::isIntegralType(destination.scalar_type(), false);
  if (integer_from && integer_to &&
      (isa::element_bytes(*to) < isa::element_bytes(*from) ||
       (isa::element_bytes(*to) == isa::element_bytes(*from) && *to != *from)))
    return false;
  if (may_share_memory(source, destination)) return false;
  emitter::ElementwiseSpec spec{emitter::ElementwiseOp::Convert,
                                static_cast<int>(destination.element_size()),
                                destination.sizes().vec(),
                                {destination.strides().vec(), source.strides().vec()}};
  spec.convert_from = *from;
  spec.convert_to = *to;
  const uint64_t addresses[] = {device_address(destination), device_address(source)};
  return launched_natively(
      [&] { launch_elementwise(destination.device().index(), runtime_device(destination), spec, addresses); });
}

// An integer narrowed to a type no wider (int64 to int32, int32 to int8, int8 to uint8, ...) keeps its low bytes,
// two's complement, as PyTorch's C casts wrap: a strided copy of those bytes (the first of each element, little-endian
// as the device is) in the destination's type.
bool narrow_integers_on_device(const at::Tensor& source, const at::Tensor& destination) {
  if (!at::isIntegralType(source.scalar_type(), false) || !at::isIntegralType(destination.scalar_type(), false) ||
      destination.element_size() > source.element_size() || may_share_memory(source, destination))
    return false;
  const int64_t ratio = static_cast<int64_t>(source.element_size() / destination.element_size());
  std::vector<int64_t> strides = source.strides().vec();
  for (int64_t& stride : strides) stride *= ratio;
  const at::Tensor low_bytes = at::empty({0}, destination.options())
                                   .set_(source.storage(), source.storage_offset() * ratio, source.sizes(), strides);
  copy_on_device(low_bytes, destination);
  return true;
}

// int16, which the ISA has no element type for, converted through int32: a value becomes int32 first (a float
// truncated, as C's casts do) and then keeps its two low bytes (narrow_integers_on_device); an int16 becomes an int32
// by copying its bytes into the low half of each (zeroed) int32 and extending the sign bit, then converts as int32.
bool convert_through_int32_on_device(const at::Tensor& source, const at::Tensor& destination) {
  const bool to_short =
      destination.scalar_type() == at::kShort && conversion_type(source.scalar_type()) && !source.is_complex();
  const bool from_short =
      source.scalar_type() == at::kShort && conversion_type(destination.scalar_type()) && !destination.is_complex();
  if ((!to_short && !from_short) || may_share_memory(source, destination)) return false;
  const at::TensorOptions int32 = source.options().dtype(at::kInt);
  if (to_short) {
    at::Tensor wide = at::empty(source.sizes(), int32);
    wide.copy_(source);
    return narrow_integers_on_device(wide, destination);
  }
  at::Tensor wide = at::zeros(source.sizes(), int32);
  std::vector<int64_t> strides = wide.strides().vec();
  for (int64_t& stride : strides) stride *= 2;
  at::Tensor low_halves = at::empty({0}, source.options()).set_(wide.storage(), 0, wide.sizes(), strides);
  copy_on_device(source, low_halves);
  wide = at::where(at::ge(wide, 32768), at::sub(wide, 65536), wide);  // the sign bit, extended
  destination.copy_(wide);
  return true;
}

// Conversions into or out of a complex dtype as copies of parts: a real source fills the real parts and zeros the
// imaginary ones; a complex source gives its parts to a complex destination, and its real parts to a real one
// (copy_from has warned that the imaginary parts are discarded). Each part's conversion is a copy of its own, native
// where that dtype pair is. Neither operand has a conjugate or negative bit here.
bool convert_complex_parts_on_device(const at::Tensor& source, const at::Tensor& destination) {
  if ((!source.is_complex() && !destination.is_complex()) || may_share_memory(source, destination)) return false;
  if (!destination.is_complex()) {
    destination.copy_(at::view_as_real(source).select(-1, 0));
    return true;
  }
  const at::Tensor parts = at::view_as_real(destination);
  if (source.is_complex()) {
    parts.copy_(at::view_as_real(source));
  } else {
    parts.select(-1, 1).zero_();
    parts.select(-1, 0).copy_(source);
  }
  return true;
}

// The values a tensor stores, without its lazy conjugate or negative bit (the same storage, sizes and strides).
at::Tensor stored_values(const at::Tensor& tensor) {
  return at::empty({0}, tensor.options())
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(), tensor.strides());
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(at::is_expandable_to(self.sizes(), dst.sizes()), "npusim: cannot copy a tensor of shape ", self.sizes(),
              " into one of shape ", dst.sizes());
  if (dst.numel() == 0) return dst;
  if (self.is_complex() && !dst.is_complex())  // PyTorch's own copy kernels warn so; its copy_ leaves it to devices
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  if (self.is_conj() || dst.is_conj() || self.is_neg() || dst.is_neg()) {
    // Conjugate and negative views (x.conj(), its imaginary part): copy the stored values, then apply to the
    // destination's what its bits and the source's differ by, as the CPU's copy_ does.
    const at::Tensor stored = stored_values(dst);
    copy_from(stored_values(self), stored, non_blocking);
    if (self.is_conj() != dst.is_conj()) at::view_as_real(stored).select(-1, 1).neg_();  // the imaginary parts
    if (self.is_neg() != dst.is_neg()) stored.neg_();
    return dst;
  }
  if (self.is_cpu()) {
    copy_host_to_device(self, dst);
  } else if (dst.is_cpu()) {
    copy_device_to_host(self, dst);
  } else if (self.device() != dst.device()) {
    // Between two npusim devices: through host memory, as between GPUs without peer access.
    copy_host_to_device(self.cpu(), dst);
  } else if (self.scalar_type() == dst.scalar_type()) {
    copy_on_device(self.expand_as(dst), dst);
  } else if (!convert_on_device(self.expand_as(dst), dst) && !narrow_integers_on_device(self.expand_as(dst), dst) &&
             !convert_complex_parts_on_device(self.expand_as(dst), dst) &&
             !convert_through_int32_on_device(self.expand_as(dst), dst)) {
    note_cpu_fallback("aten::_to_copy (dtype conversion)");
    copy_host_to_device(self.cpu(), dst);
  }
  return dst;
}

// The CPU fallback's way back for an out= argument. A result the CPU kernel resized (laid out by PyTorch's rules for
// that op, a transposed or channels-last input giving a transposed or channels-last result) keeps that layout on the
// device; an out= tensor that already had the right shape keeps its own.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    resize_tensor(dst, self.sizes(), std::nullopt);
    if (self.is_non_overlapping_and_dense() && dst.strides() != self.strides())
      dst.unsafeGetTensorImpl()->set_sizes_and_strides(self.sizes(), self.strides());
  }
  return copy_from(self, dst, false);
}

// The whole storage of a device tensor mirrored on the host, and the tensor's view into that mirror.
struct HostMirror {
  at::Tensor bytes;
  at::Tensor view;
};
HostMirror mirror_on_host(const at::Tensor& tensor) {
  const c10::Storage& storage = tensor.storage();
  at::Tensor bytes = at::empty({static_cast<int64_t>(storage.nbytes())}, at::kByte);
  runtime_device(tensor).copy_device_to_host(bytes.mutable_data_ptr(), pointer_to_device_address(storage.data()),
                                             storage.nbytes());
  at::Tensor view =
      bytes.view(tensor.scalar_type()).as_strided(tensor.sizes(), tensor.strides(), tensor.storage_offset());
  return {bytes, view};
}

// For layouts no copy kernel can express: edit the destination's storage on the host and write it back.
void copy_through_host(const at::Tensor& source, const at::Tensor& destination) {
  note_cpu_fallback("aten::copy_ (strided layout the emitter cannot express)");
  const at::Tensor host_source = mirror_on_host(source).view.clone();
  HostMirror host_destination = mirror_on_host(destination);
  host_destination.view.copy_(host_source);
  runtime_device(destination)
      .copy_host_to_device(pointer_to_device_address(destination.storage().data()),
                           host_destination.bytes.const_data_ptr(), host_destination.bytes.nbytes());
}

}  // namespace

bool may_share_memory(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().is_alias_of(b.storage()) && at::get_overlap_status(a, b) != at::MemOverlapStatus::No;
}

void copy_on_device(const at::Tensor& source, const at::Tensor& destination) {
  TORCH_CHECK(source.device() == destination.device(), "npusim: copies between devices ", source.device(), " and ",
              destination.device(), " are not supported");
  if (may_share_memory(source, destination)) {
    if (at::get_overlap_status(source, destination) == at::MemOverlapStatus::Full) return;  // the same elements
    // A tiled copy would read what it already overwrote: stage the source in fresh memory.
    const at::Tensor staged = at::empty(source.sizes(), source.options());
    copy_on_device(source, staged);
    copy_on_device(staged, destination);
    return;
  }
  runtime::Device& device = runtime_device(destination);
  if (plainly_contiguous(source) && plainly_contiguous(destination) && source.sizes() == destination.sizes()) {
    device.copy_device_to_device(device_address(destination), device_address(source), destination.nbytes());
    return;
  }
  const auto element_bytes = static_cast<int>(destination.element_size());
  if (element_bytes == 16 && source.element_size() == 16) {  // complex128, which no DMA element holds: its halves
    const auto halves = [](const at::Tensor& t) {
      std::vector<int64_t> sizes = t.sizes().vec(), strides = t.strides().vec();
      for (int64_t& stride : strides) stride *= 2;
      sizes.push_back(2);
      strides.push_back(1);
      return at::empty({0}, t.options().dtype(at::kLong)).set_(t.storage(), 2 * t.storage_offset(), sizes, strides);
    };
    copy_on_device(halves(source), halves(destination));
    return;
  }
  emitter::ElementwiseSpec spec{emitter::ElementwiseOp::Copy,
                                element_bytes,
                                destination.sizes().vec(),
                                {destination.strides().vec(), source.strides().vec()}};
  const uint64_t addresses[] = {device_address(destination), device_address(source)};
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8) {
    copy_through_host(source, destination);  // no DMA element of this size
    return;
  }
  if (launched_natively([&] { launch_elementwise(destination.device().index(), device, spec, addresses); })) return;
  const bool sliced = launch_by_slices(destination, [&](int64_t dim, int64_t index) {
    copy_on_device(source.select(dim, index), destination.select(dim, index));
    return true;
  });
  if (!sliced) copy_through_host(source, destination);
}

namespace {

// flip: a copy kernel that reads the flipped dimensions backwards (negative DMA strides from their last element),
// for 1-, 2-, 4- and 8-byte elements; others take the CPU fallback.
at::Tensor npusim_flip(const at::Tensor& self, at::IntArrayRef dims) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);  // laid out as self, as PyTorch's flip
  const int64_t bytes = self.element_size();
  if (out.numel() == 0) return out;
  if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) {
    std::vector<int64_t> strides = self.strides().vec();
    std::vector<bool> flipped(std::max<int64_t>(self.dim(), 1));
    int64_t first = 0;  // the element offset of the source's first (flipped) element
    for (int64_t dim : dims) {
      dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
      TORCH_CHECK(!flipped[dim], "dims has duplicates, original flip dims size=", dims.size());
      flipped[dim] = true;
      if (self.dim() == 0) continue;
      first += (self.size(dim) - 1) * strides[dim];
      strides[dim] = -strides[dim];
    }
    const emitter::ElementwiseSpec spec{
        emitter::ElementwiseOp::Copy, static_cast<int>(bytes), out.sizes().vec(), {out.strides().vec(), strides}};
    const uint64_t addresses[] = {device_address(out), device_address(self) + first * bytes};
    if (launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
      return out;
  }
  torch::jit::Stack stack{self, dims};
  call_cpu_fallback("aten::flip", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", npusim_flip);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);              // a strided view (repeat uses it)
  m.impl("view_as_real", at::native::view_as_real);  // complex as pairs of reals, and back: views
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_tensor);
  m.impl("set_.source_Storage", set_whole_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}

// copy_from handles the conjugate and negative bits itself. PyTorch's fallback for them would materialise the source
// with clone, whose copy_ comes back to _copy_from with the bit still set: a recursion until the stack overflows.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace npusim::bridge
