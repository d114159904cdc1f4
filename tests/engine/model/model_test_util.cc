// Test-only helpers of tests/engine/model (see model_test_util.h).
#include "tests/engine/model/model_test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors.h"
#include "gtest/gtest.h"

namespace onecard::testing {

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/onecard_model_XXXXXX");
  char* made = ::mkdtemp(pattern.data());
  if (made == nullptr) ADD_FAILURE() << "mkdtemp " << pattern << " failed";
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::Write(const std::string& name, const std::string& bytes) const {
  std::filesystem::path path = std::filesystem::path(path_) / name;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
  return path.string();
}

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json LoadTestJson(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(ReadTestFile(path), nullptr, false);
  if (j.is_discarded()) ADD_FAILURE() << path << " is not JSON";
  return j;
}

void AppendU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<char*>(&v), 4); }
void AppendU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<char*>(&v), 8); }
void PutU32(std::string* bytes, uint64_t at, uint32_t v) { std::memcpy(bytes->data() + at, &v, 4); }
void PutU64(std::string* bytes, uint64_t at, uint64_t v) { std::memcpy(bytes->data() + at, &v, 8); }

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::string GgufString(const std::string& s) {
  std::string out;
  AppendU64(&out, s.size());
  return out + s;
}

void GgufTestWriter::AddRaw(const std::string& key, uint32_t type, const std::string& value_bytes) {
  kv_bytes_ += GgufString(key);
  AppendU32(&kv_bytes_, type);
  kv_bytes_ += value_bytes;
  ++kv_count_;
}

namespace {
int ScalarBytes(uint32_t type) {
  static const int kBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return kBytes[type];
}
std::string IntBytes(uint32_t type, int64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), ScalarBytes(type));
}
}  // namespace

void GgufTestWriter::AddInt(const std::string& key, uint32_t type, int64_t value) {
  AddRaw(key, type, IntBytes(type, value));
}
void GgufTestWriter::AddF32(const std::string& key, float value) {
  AddRaw(key, kMetaF32, std::string(reinterpret_cast<const char*>(&value), 4));
}
void GgufTestWriter::AddF64(const std::string& key, double value) {
  AddRaw(key, kMetaF64, std::string(reinterpret_cast<const char*>(&value), 8));
}
void GgufTestWriter::AddBool(const std::string& key, bool value) {
  AddRaw(key, kMetaBool, std::string(1, value ? '\1' : '\0'));
}
void GgufTestWriter::AddString(const std::string& key, const std::string& value) {
  AddRaw(key, kMetaString, GgufString(value));
}

void GgufTestWriter::AddIntArray(const std::string& key, uint32_t type,
                                 const std::vector<int64_t>& values) {
  std::string bytes;
  AppendU32(&bytes, type);
  AppendU64(&bytes, values.size());
  for (int64_t v : values) bytes += IntBytes(type, v);
  AddRaw(key, kMetaArray, bytes);
}

void GgufTestWriter::AddF32Array(const std::string& key, const std::vector<float>& values) {
  std::string bytes;
  AppendU32(&bytes, kMetaF32);
  AppendU64(&bytes, values.size());
  AddRaw(key, kMetaArray, bytes + FloatBytes(values));
}

void GgufTestWriter::AddStringArray(const std::string& key,
                                    const std::vector<std::string>& values) {
  std::string bytes;
  AppendU32(&bytes, kMetaString);
  AppendU64(&bytes, values.size());
  for (const std::string& v : values) bytes += GgufString(v);
  AddRaw(key, kMetaArray, bytes);
}

void GgufTestWriter::AddTensor(const std::string& name, uint32_t ggml_type,
                               std::vector<int64_t> shape, std::string data) {
  tensors_.push_back({name, ggml_type, std::move(shape), std::move(data)});
}

void GgufTestWriter::AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                                  const std::vector<float>& values) {
  AddTensor(name, kGgmlF32, std::move(shape), FloatBytes(values));
}

GgufBytes GgufTestWriter::Build() const {
  GgufBytes out;
  std::string& b = out.bytes;
  b = "GGUF";
  AppendU32(&b, version_);
  AppendU64(&b, tensors_.size());
  AppendU64(&b, kv_count_);
  b += kv_bytes_;
  out.infos_offset = b.size();
  auto align = [this](uint64_t n) { return (n + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t data_offset = 0;
  for (const Tensor& t : tensors_) {
    out.tensor_info_offsets.push_back(b.size());
    b += GgufString(t.name);
    AppendU32(&b, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) AppendU64(&b, *it);
    out.type_fields.push_back(b.size());
    AppendU32(&b, t.type);
    out.offset_fields.push_back(b.size());
    AppendU64(&b, data_offset);
    data_offset = align(data_offset + t.data.size());
  }
  b.resize(align(b.size()), '\0');
  out.data_offset = b.size();
  for (const Tensor& t : tensors_) {
    b += t.data;
    b.resize(out.data_offset + align(b.size() - out.data_offset), '\0');
  }
  return out;
}

std::string SafetensorsBytes(const std::string& header_json, const std::string& data) {
  std::string out;
  AppendU64(&out, header_json.size());
  return out + header_json + data;
}

std::string SafetensorsRaw(const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    uint64_t begin = data.size();
    data += t.bytes;
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  return SafetensorsBytes(header.dump(), data);
}

std::vector<RawTensor> ReadRawTensors(const std::string& path) {
  auto source = engine::SafetensorsSource::OpenFile(path);
  if (!source.ok()) {
    ADD_FAILURE() << source.status();
    return {};
  }
  std::vector<RawTensor> tensors;
  for (const std::string& name : (*source)->TensorNames()) {
    const engine::TensorView* v = (*source)->Find(name);
    tensors.push_back({name, std::string(engine::DTypeName(v->dtype)), v->shape,
                       std::string(reinterpret_cast<const char*>(v->data), v->size_bytes)});
  }
  return tensors;
}

std::string SafetensorsF32(const std::vector<F32Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const F32Tensor& t : tensors) {
    uint64_t begin = data.size();
    data += FloatBytes(t.values);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  return SafetensorsBytes(header.dump(), data);
}

void ExpectSameModelConfig(const engine::ModelConfig& a, const engine::ModelConfig& b,
                           bool compare_name) {
  if (compare_name) EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.enabled, b.rope_scaling.enabled);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

EditedCheckpoint::EditedCheckpoint(const std::string& folder) {
  for (const char* f : {"config.json", "quantize_config.json"}) {
    if (std::filesystem::exists(folder + "/" + f)) {
      scratch_.Write(f, ReadTestFile(folder + "/" + f));
    }
  }
  tensors_ = ReadRawTensors(folder + "/model.safetensors");
}

RawTensor* EditedCheckpoint::Find(const std::string& name) {
  for (RawTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return &tensors_[0];
}

void EditedCheckpoint::Remove(const std::string& name) {
  std::erase_if(tensors_, [&](const RawTensor& t) { return t.name == name; });
}

void EditedCheckpoint::WriteFile(const std::string& name, const std::string& text) const {
  scratch_.Write(name, text);
}

void EditedCheckpoint::RemoveFile(const std::string& name) const {
  std::filesystem::remove(scratch_.path() + "/" + name);
}

void EditedCheckpoint::WriteTensors() const {
  scratch_.Write("model.safetensors", SafetensorsRaw(tensors_));
}

absl::Status EditedCheckpoint::Load() const {
  WriteTensors();
  absl::StatusOr<engine::Checkpoint> ckpt = engine::OpenCheckpoint(scratch_.path());
  if (!ckpt.ok()) return ckpt.status();
  return engine::LoadWeightsF32(*ckpt).status();
}

}  // namespace onecard::testing
