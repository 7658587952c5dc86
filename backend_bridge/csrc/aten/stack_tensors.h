// The tensors inside a boxed call's arguments and results (an IValue: a tensor, a list of tensors or of optional
// tensors), for kernels that rewrite a call's tensors and run it again (float32_compute.cpp, element_bits.cpp).
#pragma once

#include <ATen/core/ivalue.h>

namespace npusim::bridge {

// Applies f to every tensor in `value` (a tensor, a list of tensors or of optional tensors); other values as they are.
template <typename F>
c10::IValue map_tensors(const c10::IValue& value, const F& f) {
  if (value.isTensor()) return f(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> mapped;
    for (const at::Tensor& t : value.toTensorList()) mapped.push_back(f(t));
    return mapped;
  }
  if (value.isList()) {
    const c10::List<c10::IValue> list = value.toList();
    if (list.size() == 0 || !list.get(0).isTensor() && !list.get(0).isNone()) return value;
    c10::List<std::optional<at::Tensor>> mapped;
    for (const c10::IValue& item : list)
      mapped.push_back(item.isTensor() ? std::optional(f(item.toTensor())) : std::nullopt);
    return mapped;
  }
  return value;
}

template <typename F>
void for_each_tensor(const c10::IValue& value, const F& f) {
  map_tensors(value, [&](const at::Tensor& t) {
    f(t);
    return t;
  });
}

}  // namespace npusim::bridge
