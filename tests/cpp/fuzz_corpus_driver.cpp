// A bounded, deterministic stand-in for libFuzzer, for the tests: feeds a fuzz target every file of its seed corpus,
// then `iterations` inputs made from them by libFuzzer-like mutations (bytes changed, inserted, erased, copied, whole
// 64-bit words replaced, two inputs spliced). The same seed gives the same inputs, so a failure reproduces.
// An input that crashes the target is written to crash-input in the working directory, for the libFuzzer binary or a
// debugger to replay. Usage: npusim-NAME-fuzz-smoke CORPUS_DIR [iterations] [seed]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Present when a sanitizer runtime is linked: called before a sanitizer ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

using Input = std::vector<uint8_t>;

const Input* current_input = nullptr;

// Only async-signal-safe calls: this runs from a signal handler or a sanitizer's death callback.
void save_current_input() {
  if (!current_input) return;
  const int file = open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (file < 0) return;
  if (write(file, current_input->data(), current_input->size()) >= 0) {
    const char note[] = "fuzz: the input that failed is in ./crash-input\n";
    if (write(STDERR_FILENO, note, sizeof note - 1) < 0) {
    }
  }
  close(file);
  current_input = nullptr;
}

void on_fatal_signal(int signal) {
  save_current_input();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

std::vector<Input> read_corpus(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // directory order differs between file systems
  std::vector<Input> corpus;
  for (const auto& file : files) {
    std::ifstream stream(file, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
  }
  return corpus;
}

// Values that sit at the edges of ranges and sizes, as libFuzzer's "interesting" integers do.
constexpr uint64_t kInterestingWords[] = {0,          1,          0x7f,       0x80,       0xff,       0x100,
                                          0xffff,     0x10000,    0x7fffffff, 0x80000000, 0xffffffff, 1ull << 32,
                                          1ull << 63, ~0ull >> 1, ~0ull,      64,         4096,       1ull << 20};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  Input mutate(const std::vector<Input>& corpus) {
    Input input = corpus[below(corpus.size())];
    for (uint64_t n = 1 + below(6); n > 0; --n) mutate_once(input, corpus);
    if (input.size() > kMaxBytes) input.resize(kMaxBytes);
    return input;
  }

 private:
  static constexpr size_t kMaxBytes = 4096;

  uint64_t below(uint64_t bound) { return bound == 0 ? 0 : random_() % bound; }

  void mutate_once(Input& input, const std::vector<Input>& corpus) {
    const size_t size = input.size();
    switch (below(8)) {
      case 0:  // flip a bit
        if (size) input[below(size)] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:  // a random byte
        if (size) input[below(size)] = static_cast<uint8_t>(random_());
        break;
      case 2:  // insert random bytes
        for (uint64_t n = 1 + below(8), at = below(size + 1); n > 0; --n)
          input.insert(input.begin() + at, static_cast<uint8_t>(random_()));
        break;
      case 3:  // erase a range
        if (size) {
          const size_t at = below(size), count = 1 + below(std::min<size_t>(16, size - at));
          input.erase(input.begin() + at, input.begin() + at + count);
        }
        break;
      case 4:  // copy a range elsewhere
        if (size) {
          const size_t from = below(size), count = 1 + below(std::min<size_t>(32, size - from));
          const Input piece(input.begin() + from, input.begin() + from + count);
          input.insert(input.begin() + below(size + 1), piece.begin(), piece.end());
        }
        break;
      case 5:  // an aligned 64-bit word: random or an edge value (instruction words, command fields)
        if (size >= 8) {
          const uint64_t word = below(2) ? random_() : kInterestingWords[below(std::size(kInterestingWords))];
          const size_t at = below(size / 8) * 8;
          for (int b = 0; b < 8; ++b) input[at + b] = static_cast<uint8_t>(word >> (8 * b));
        }
        break;
      case 6:  // a digit changed (numbers in text inputs)
        for (size_t at = below(size + 1); at < size; ++at)
          if (input[at] >= '0' && input[at] <= '9') {
            input[at] = static_cast<uint8_t>('0' + below(10));
            break;
          }
        break;
      default: {  // splice: this input's head, another's tail
        const Input& other = corpus[below(corpus.size())];
        input.resize(below(size + 1));
        input.insert(input.end(), other.begin() + below(other.size() + 1), other.end());
        break;
      }
    }
  }

  std::mt19937_64 random_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [iterations] [seed]\n", argv[0]);
    return 2;
  }
  const std::vector<Input> corpus = read_corpus(argv[1]);
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: no seed inputs in %s\n", argv[0], argv[1]);
    return 2;
  }
  const long iterations = argc > 2 ? std::atol(argv[2]) : 1000;
  Mutator mutator(argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1);
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(signal, on_fatal_signal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_current_input);
  for (const Input& input : corpus) {
    current_input = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  for (long k = 0; k < iterations; ++k) {
    const Input input = mutator.mutate(corpus);
    current_input = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  current_input = nullptr;
  std::printf("%zu seed inputs and %ld mutations of them: no crash, no inconsistency\n", corpus.size(), iterations);
  return 0;
}
