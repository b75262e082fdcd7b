#include "frontends/gguf/GgufWriter.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "frontends/gguf/GgufFile.h"
#include "ir/StatusMacros.h"
#include "ir/support/AtomicFile.h"

namespace memra::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

namespace {

constexpr uint32_t kWriteVersion = 3;

bool IsPowerOfTwo(uint64_t a) { return a != 0 && (a & (a - 1)) == 0; }

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

std::string Quoted(absl::string_view s) { return absl::StrCat("'", absl::CHexEscape(s), "'"); }

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// Checks that `v` is encodable and reads back as itself: known types, in-range integers, arrays
// whose elements all have the declared element type, bounded nesting.
absl::Status ValidateValue(const Value& v, int depth, absl::string_view key, uint64_t* n_values) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("gguf writer: key ", Quoted(key), ": ", what));
  };
  switch (v.type) {
    case ValueType::kU8:
      return v.u <= 0xFF ? absl::OkStatus() : bad(absl::StrCat("u8 value ", v.u, " out of range"));
    case ValueType::kU16:
      return v.u <= 0xFFFF ? absl::OkStatus() : bad(absl::StrCat("u16 value ", v.u, " out of range"));
    case ValueType::kU32:
      return v.u <= 0xFFFFFFFFu ? absl::OkStatus() : bad(absl::StrCat("u32 value ", v.u, " out of range"));
    case ValueType::kI8:
      return v.i >= -128 && v.i <= 127 ? absl::OkStatus() : bad(absl::StrCat("i8 value ", v.i, " out of range"));
    case ValueType::kI16:
      return v.i >= -32768 && v.i <= 32767 ? absl::OkStatus() : bad(absl::StrCat("i16 value ", v.i, " out of range"));
    case ValueType::kI32:
      return v.i >= std::numeric_limits<int32_t>::min() && v.i <= std::numeric_limits<int32_t>::max()
                 ? absl::OkStatus()
                 : bad(absl::StrCat("i32 value ", v.i, " out of range"));
    case ValueType::kBool:
      return v.u <= 1 ? absl::OkStatus() : bad(absl::StrCat("bool value ", v.u, " is not 0 or 1"));
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF32:
    case ValueType::kF64:
    case ValueType::kString:
      return absl::OkStatus();
    case ValueType::kArray: {
      if (depth >= kMaxArrayDepth) return bad(absl::StrCat("arrays nested more than ", kMaxArrayDepth, " levels deep"));
      if (static_cast<uint32_t>(v.elem_type) >= kValueTypeCount)
        return bad(absl::StrCat("invalid array element type ", static_cast<uint32_t>(v.elem_type)));
      if (v.array.size() > kMaxMetadataValues - *n_values)
        return bad(absl::StrCat("more than ", kMaxMetadataValues, " metadata values"));
      *n_values += v.array.size();
      for (size_t k = 0; k < v.array.size(); ++k) {
        const Value& e = v.array[k];
        if (e.type != v.elem_type)
          return bad(absl::StrCat("array element ", k, " has type ", ValueTypeName(e.type),
                                  ", the array's element type is ", ValueTypeName(v.elem_type)));
        MEMRA_RETURN_IF_ERROR(ValidateValue(e, depth + 1, key, n_values));
      }
      return absl::OkStatus();
    }
  }
  return bad(absl::StrCat("invalid value type ", static_cast<uint32_t>(v.type)));
}

void EncodeValue(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type) {
    case ValueType::kU8:
      Put<uint8_t>(out, static_cast<uint8_t>(v.u));
      return;
    case ValueType::kI8:
      Put<int8_t>(out, static_cast<int8_t>(v.i));
      return;
    case ValueType::kU16:
      Put<uint16_t>(out, static_cast<uint16_t>(v.u));
      return;
    case ValueType::kI16:
      Put<int16_t>(out, static_cast<int16_t>(v.i));
      return;
    case ValueType::kU32:
      Put<uint32_t>(out, static_cast<uint32_t>(v.u));
      return;
    case ValueType::kI32:
      Put<int32_t>(out, static_cast<int32_t>(v.i));
      return;
    case ValueType::kU64:
      Put<uint64_t>(out, v.u);
      return;
    case ValueType::kI64:
      Put<int64_t>(out, v.i);
      return;
    case ValueType::kF32:
      Put<float>(out, static_cast<float>(v.f));
      return;
    case ValueType::kF64:
      Put<double>(out, v.f);
      return;
    case ValueType::kBool:
      Put<uint8_t>(out, v.u ? 1 : 0);
      return;
    case ValueType::kString:
      PutString(out, v.s);
      return;
    case ValueType::kArray:
      Put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(out, v.array.size());
      for (const Value& e : v.array) EncodeValue(out, e);
      return;
  }
}

}  // namespace

// Where the bytes go: a file descriptor or memory.
class detail::GgufSink {
 public:
  virtual ~GgufSink() = default;
  virtual absl::Status Append(const uint8_t* data, size_t n) = 0;
  absl::Status Zeros(uint64_t n) {
    static const uint8_t kZeros[4096] = {};
    while (n > 0) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
      MEMRA_RETURN_IF_ERROR(Append(kZeros, chunk));
      n -= chunk;
    }
    return absl::OkStatus();
  }
};

namespace {

class FileSink : public detail::GgufSink {
 public:
  explicit FileSink(AtomicFile& file) : file_(file) {}
  absl::Status Append(const uint8_t* data, size_t n) override { return file_.Write(data, n); }

 private:
  AtomicFile& file_;
};

class BytesSink : public detail::GgufSink {
 public:
  explicit BytesSink(std::vector<uint8_t>* out) : out_(out) {}
  absl::Status Append(const uint8_t* data, size_t n) override {
    out_->insert(out_->end(), data, data + n);
    return absl::OkStatus();
  }

 private:
  std::vector<uint8_t>* out_;
};

}  // namespace

absl::Status GgufWriter::SetAlignment(uint32_t alignment) {
  if (!IsPowerOfTwo(alignment))
    return absl::InvalidArgumentError(
        absl::StrCat("gguf writer: alignment ", alignment, " is not a nonzero power of two"));
  if (alignment > kMaxWriterAlignment)
    return absl::InvalidArgumentError(absl::StrCat("gguf writer: alignment ", alignment,
                                                   " exceeds the writer's limit of ", kMaxWriterAlignment,
                                                   " (the padding would be written out)"));
  alignment_ = alignment;
  bool present = false;
  for (const auto& kv : kv_) present |= kv.first == "general.alignment";
  if (alignment != kDefaultAlignment || present) Set("general.alignment", Value::U32(alignment));
  return absl::OkStatus();
}

void GgufWriter::Set(const std::string& key, Value value) {
  if (key == "general.alignment" && value.type == ValueType::kU32 && value.u <= kMaxWriterAlignment &&
      IsPowerOfTwo(value.u))
    alignment_ = static_cast<uint32_t>(value.u);
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

absl::Status GgufWriter::AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                   TensorSource source) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf writer: tensor ", Quoted(name), " ", ShapeString(ne), ": ", what));
  };
  if (name.empty()) return bad("empty name");
  if (name.size() > kMaxTensorNameBytes)
    return bad(absl::StrCat("name is ", name.size(), " bytes, the limit is ", kMaxTensorNameBytes));
  for (const PendingTensor& t : tensors_)
    if (t.name == name) return bad("duplicate tensor name");
  if (ne.size() > kMaxDims) return bad(absl::StrCat("more than ", kMaxDims, " dimensions"));
  if (static_cast<uint32_t>(type) >= kGgmlTypeCount || !LookupGgmlType(static_cast<uint32_t>(type)))
    return bad(absl::StrCat("invalid ggml type id ", static_cast<uint32_t>(type)));
  if (!source) return bad("no data source");
  const GgmlTypeTraits& traits = TraitsOf(type);
  int64_t elems = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) return bad(absl::StrCat("ne[", d, "] is negative"));
    if (__builtin_mul_overflow(elems, ne[d], &elems)) return bad("element count overflows");
  }
  const int64_t ne0 = ne.empty() ? 1 : ne[0];
  if (ne0 % traits.block_elems != 0)
    return bad(
        absl::StrCat("ne[0] = ", ne0, " is not a multiple of the ", traits.name, " block size ", traits.block_elems));
  uint64_t nbytes = static_cast<uint64_t>(elems) / traits.block_elems;
  // Keep every size and the running total far from 2^64 so that padding cannot wrap.
  constexpr uint64_t kMaxTotal = uint64_t{1} << 62;
  if (__builtin_mul_overflow(nbytes, uint64_t{traits.block_bytes}, &nbytes) || nbytes > kMaxTotal)
    return bad("byte size overflows");
  uint64_t total = 0;
  for (const PendingTensor& t : tensors_) total += t.nbytes;
  if (nbytes > kMaxTotal - total) return bad("total data size overflows");
  tensors_.push_back({name, type, std::move(ne), nbytes, std::move(source)});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorBytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                        absl::Span<const uint8_t> bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  MEMRA_RETURN_IF_ERROR(AddTensor(name, type, std::move(ne), [copy](absl::Span<uint8_t> out) {
    if (out.size() != copy->size()) return absl::InternalError("gguf writer: tensor buffer size mismatch");
    if (!copy->empty()) std::memcpy(out.data(), copy->data(), copy->size());
    return absl::OkStatus();
  }));
  if (tensors_.back().nbytes != bytes.size()) {
    absl::Status s = absl::InvalidArgumentError(
        absl::StrCat("gguf writer: tensor ", Quoted(name), " ", ShapeString(tensors_.back().ne), " of type ",
                     GgmlTypeName(type), " needs ", tensors_.back().nbytes, " bytes, got ", bytes.size()));
    tensors_.pop_back();
    return s;
  }
  return absl::OkStatus();
}

uint64_t GgufWriter::TotalDataBytes() const {
  uint64_t total = 0;
  for (const PendingTensor& t : tensors_) total += AlignUp(t.nbytes, alignment_);
  return total;
}

absl::StatusOr<std::vector<uint8_t>> GgufWriter::EncodeHeader() const {
  uint64_t n_values = 0;
  for (const auto& [key, value] : kv_) {
    if (key.empty()) return absl::InvalidArgumentError("gguf writer: empty metadata key");
    MEMRA_RETURN_IF_ERROR(ValidateValue(value, 0, key, &n_values));
    if (key == "general.alignment" && (value.type != ValueType::kU32 || value.u != alignment_))
      return absl::InvalidArgumentError(
          absl::StrCat("gguf writer: 'general.alignment' must be a u32 nonzero power of two (got ",
                       ValueTypeName(value.type), " ", value.ToString(), ")"));
  }
  std::vector<uint8_t> out;
  Put<uint32_t>(out, kGgufMagic);
  Put<uint32_t>(out, kWriteVersion);
  Put<int64_t>(out, static_cast<int64_t>(tensors_.size()));
  Put<int64_t>(out, static_cast<int64_t>(kv_.size()));
  for (const auto& [key, value] : kv_) {
    PutString(out, key);
    Put<uint32_t>(out, static_cast<uint32_t>(value.type));
    EncodeValue(out, value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<int64_t>(out, d);
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, offset);
    offset += AlignUp(t.nbytes, alignment_);
  }
  out.resize(AlignUp(out.size(), alignment_), 0);
  return out;
}

absl::Status GgufWriter::WriteTo(detail::GgufSink& sink, const Progress& progress) const {
  MEMRA_ASSIGN_OR_RETURN(std::vector<uint8_t> header, EncodeHeader());
  MEMRA_RETURN_IF_ERROR(sink.Append(header.data(), header.size()));
  header.clear();
  header.shrink_to_fit();
  const uint64_t total = TotalDataBytes();
  uint64_t done = 0;
  std::vector<uint8_t> buf;  // one tensor at a time, reused
  for (const PendingTensor& t : tensors_) {
    if (t.nbytes > std::numeric_limits<size_t>::max())
      return absl::InvalidArgumentError(
          absl::StrCat("gguf writer: tensor ", Quoted(t.name), " is too large for this host"));
    buf.assign(static_cast<size_t>(t.nbytes), 0);
    if (absl::Status s = t.source(absl::MakeSpan(buf)); !s.ok())
      return absl::Status(s.code(), absl::StrCat("gguf writer: tensor ", Quoted(t.name), ": ", s.message()));
    MEMRA_RETURN_IF_ERROR(sink.Append(buf.data(), buf.size()));
    const uint64_t padded = AlignUp(t.nbytes, alignment_);
    MEMRA_RETURN_IF_ERROR(sink.Zeros(padded - t.nbytes));
    done += padded;
    if (progress) progress(done, total);
  }
  return absl::OkStatus();
}

absl::Status CheckWritableDestination(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a folder; give a file name (e.g. ", path, "/model.gguf)"));
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(path, ": the folder ", dir, " does not exist"));
  if (::access(dir.c_str(), W_OK) != 0)
    return absl::PermissionDeniedError(absl::StrCat(path, ": the folder ", dir, " is not writable"));
  return absl::OkStatus();
}

absl::Status GgufWriter::Write(const std::string& path, const Progress& progress) const {
  MEMRA_RETURN_IF_ERROR(CheckWritableDestination(path));
  MEMRA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path));
  MEMRA_RETURN_IF_ERROR(file->CheckSpace(TotalDataBytes()));
  FileSink sink(*file);
  MEMRA_RETURN_IF_ERROR(WriteTo(sink, progress));
  return file->Commit();
}

absl::StatusOr<std::vector<uint8_t>> GgufWriter::WriteToBytes() const {
  std::vector<uint8_t> out;
  BytesSink sink(&out);
  MEMRA_RETURN_IF_ERROR(WriteTo(sink, nullptr));
  return out;
}

}  // namespace memra::gguf
