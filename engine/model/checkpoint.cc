// OpenCheckpoint: a .gguf file (or any file starting with the GGUF magic), an
// HF folder (config.json + safetensors, optionally tokenizer files) or a
// synthetic model path.
// Tested by tests/engine/model/checkpoint_test.cc.
#include "engine/model/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf.h"
#include "engine/model/gguf_config.h"
#include "engine/model/hf_config.h"
#include "engine/model/hf_quant_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/synthetic_shapes.h"

namespace onecard::engine {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Only ever called on a regular file (a FIFO would block the read).
bool StartsWithGgufMagic(int fd) {
  char magic[4] = {};
  return ::read(fd, magic, 4) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

absl::StatusOr<Checkpoint> OpenGguf(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint.path = path;
  checkpoint.format = CheckpointFormat::kGguf;
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  ASSIGN_OR_RETURN(checkpoint.config, ModelConfigFromGguf(*gguf));
  checkpoint.weights = std::move(gguf);
  return checkpoint;
}

absl::StatusOr<Checkpoint> OpenHfFolder(const std::string& dir) {
  Checkpoint checkpoint;
  checkpoint.path = dir;
  checkpoint.format = CheckpointFormat::kSafetensors;
  ASSIGN_OR_RETURN(checkpoint.config, LoadHfConfig(dir + "/config.json"));
  ASSIGN_OR_RETURN(checkpoint.quant, LoadHfQuantConfig(dir));
  ASSIGN_OR_RETURN(checkpoint.weights, SafetensorsSource::OpenDirectory(dir));
  if (IsRegularFile(dir + "/tokenizer.json")) {
    checkpoint.tokenizer_json_path = dir + "/tokenizer.json";
  }
  if (IsRegularFile(dir + "/tokenizer_config.json")) {
    checkpoint.tokenizer_config_path = dir + "/tokenizer_config.json";
  }
  return checkpoint;
}

}  // namespace

const GgufFile* Checkpoint::gguf() const {
  if (format != CheckpointFormat::kGguf) return nullptr;
  return static_cast<const GgufFile*>(weights.get());
}

absl::StatusOr<Checkpoint> OpenCheckpoint(const std::string& path) {
  if (IsSyntheticModelPath(path)) {
    ASSIGN_OR_RETURN(const SyntheticModelPath synthetic, ParseSyntheticModelPath(path));
    Checkpoint checkpoint;
    checkpoint.path = path;
    checkpoint.format = CheckpointFormat::kSynthetic;
    ASSIGN_OR_RETURN(checkpoint.config, SyntheticModelConfig(synthetic.shape));
    checkpoint.synthetic_weights = synthetic.weights;
    return checkpoint;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  if (S_ISDIR(st.st_mode)) {
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!IsRegularFile(dir + "/config.json")) {
      return absl::NotFoundError(
          absl::StrCat(dir, ": folder without config.json (not an HF checkpoint)"));
    }
    return OpenHfFolder(dir);
  }
  // A FIFO, device or socket is refused here, before anything reads it.
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  const bool gguf = path.ends_with(".gguf") || StartsWithGgufMagic(fd);
  ::close(fd);
  if (gguf) return OpenGguf(path);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": not a .gguf file nor an HF checkpoint folder (config.json + safetensors)"));
}

}  // namespace onecard::engine
