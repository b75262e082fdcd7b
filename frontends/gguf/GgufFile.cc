#include "frontends/gguf/GgufFile.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/StatusMacros.h"

namespace memra::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

// Smallest number of bytes one encoded value of type `t` can occupy.
uint64_t MinEncodedSize(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
      return 8;
    case ValueType::kString:
      return 8;  // u64 length
    case ValueType::kArray:
      return 4 + 8;  // element type + count
  }
  return 1;
}

constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;          // non-empty key, type, smallest value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

bool IsUnsigned(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kU16 || t == ValueType::kU32 || t == ValueType::kU64;
}

// Printable, bounded rendering of a name read from the file.
std::string Quoted(absl::string_view s) {
  constexpr size_t kMax = 96;
  std::string out = absl::StrCat("'", absl::CHexEscape(s.substr(0, kMax)));
  if (s.size() > kMax) absl::StrAppend(&out, "...");
  out += '\'';
  return out;
}

// Rounds `x` up to a multiple of the power of two `a`; false on overflow.
bool AlignUp(uint64_t x, uint64_t a, uint64_t* out) {
  uint64_t sum;
  if (__builtin_add_overflow(x, a - 1, &sum)) return false;
  *out = sum & ~(a - 1);
  return true;
}

// Reads little-endian fields from [base, base+size) with bounds checks; errors carry the file
// name, the current context ("key 'x' (at offset N)", "tensor 'y' (info at offset M)") and the
// offset of the field.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path) : base_(base), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  // What is being parsed, for messages; formatted only when an error is reported. `name` must
  // stay valid until the context changes.
  enum class Ctx { kNone, kHeader, kKvIndex, kKey, kTensorIndex, kTensor };
  void set_context(Ctx kind, uint64_t at = 0, absl::string_view name = {}, int64_t index = 0, int64_t count = 0) {
    ctx_ = {kind, at, name, index, count};
  }

  absl::Status Fail(absl::string_view msg) const {
    std::string where;
    switch (ctx_.kind) {
      case Ctx::kNone:
        break;
      case Ctx::kHeader:
        where = "header: ";
        break;
      case Ctx::kKvIndex:
        where = absl::StrCat("key/value pair ", ctx_.index, " of ", ctx_.count, " (at offset ", ctx_.at, "): ");
        break;
      case Ctx::kKey:
        where = absl::StrCat("key ", Quoted(ctx_.name), " (at offset ", ctx_.at, "): ");
        break;
      case Ctx::kTensorIndex:
        where = absl::StrCat("tensor info ", ctx_.index, " of ", ctx_.count, " (at offset ", ctx_.at, "): ");
        break;
      case Ctx::kTensor:
        where = absl::StrCat("tensor ", Quoted(ctx_.name), " (info at offset ", ctx_.at, "): ");
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", where, msg));
  }

  absl::Status Need(uint64_t n, absl::string_view field) const {
    if (n <= remaining()) return absl::OkStatus();
    return Fail(absl::StrCat(field, " at offset ", pos_, ": truncated file (needs ", n, " bytes, ", remaining(),
                             " left; file size ", size_, ")"));
  }

  template <typename T>
  absl::Status Read(T* out, absl::string_view field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (sizeof(T) > remaining()) return Need(sizeof(T), field);
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // u64 length + bytes. `max_len` bounds the length before anything is allocated.
  absl::Status ReadString(std::string* out, absl::string_view field, uint64_t max_len,
                          absl::string_view max_reason = "") {
    uint64_t at = pos_;
    uint64_t len = 0;
    if (absl::Status s = Read(&len, field); !s.ok()) return s;
    if (len > max_len)
      return Fail(absl::StrCat(field, " length ", len, " at offset ", at, " exceeds ", max_len, " bytes", max_reason));
    if (len > remaining())
      return Fail(absl::StrCat(field, " length ", len, " at offset ", at, " extends past end of file (", remaining(),
                               " bytes left; file size ", size_, ")"));
    out->assign(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return absl::OkStatus();
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
  struct {
    Ctx kind = Ctx::kNone;
    uint64_t at = 0;
    absl::string_view name;
    int64_t index = 0, count = 0;
  } ctx_;
};

class MetadataReader {
 public:
  explicit MetadataReader(Cursor& c) : c_(c) {}

  absl::Status ReadValueType(ValueType* t, absl::string_view field) {
    uint64_t at = c_.pos();
    uint32_t raw = 0;
    if (absl::Status s = c_.Read(&raw, field); !s.ok()) return s;
    if (raw >= kValueTypeCount)
      return c_.Fail(absl::StrCat("unknown ", field, " ", static_cast<int32_t>(raw), " at offset ", at, " (valid: 0..",
                                  kValueTypeCount - 1, ")"));
    *t = static_cast<ValueType>(raw);
    return absl::OkStatus();
  }

  absl::Status ReadValue(ValueType t, int depth, Value* out) {
    out->type = t;
    switch (t) {
      case ValueType::kU8:
        return ReadUnsigned<uint8_t>(out);
      case ValueType::kU16:
        return ReadUnsigned<uint16_t>(out);
      case ValueType::kU32:
        return ReadUnsigned<uint32_t>(out);
      case ValueType::kU64:
        return ReadUnsigned<uint64_t>(out);
      case ValueType::kI8:
        return ReadSigned<int8_t>(out);
      case ValueType::kI16:
        return ReadSigned<int16_t>(out);
      case ValueType::kI32:
        return ReadSigned<int32_t>(out);
      case ValueType::kI64:
        return ReadSigned<int64_t>(out);
      case ValueType::kBool: {
        uint8_t b = 0;
        if (absl::Status s = c_.Read(&b, "bool value"); !s.ok()) return s;
        out->u = b != 0;
        return absl::OkStatus();
      }
      case ValueType::kF32: {
        float v = 0;
        if (absl::Status s = c_.Read(&v, "f32 value"); !s.ok()) return s;
        out->f = v;
        return absl::OkStatus();
      }
      case ValueType::kF64: {
        double v = 0;
        if (absl::Status s = c_.Read(&v, "f64 value"); !s.ok()) return s;
        out->f = v;
        return absl::OkStatus();
      }
      case ValueType::kString:
        return c_.ReadString(&out->s, "string value", std::numeric_limits<uint64_t>::max());
      case ValueType::kArray:
        return ReadArray(depth, out);
    }
    return c_.Fail("internal error: unhandled value type");
  }

 private:
  template <typename T>
  absl::Status ReadUnsigned(Value* out) {
    T v{};
    if (absl::Status s = c_.Read(&v, "integer value"); !s.ok()) return s;
    out->u = v;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status ReadSigned(Value* out) {
    T v{};
    if (absl::Status s = c_.Read(&v, "integer value"); !s.ok()) return s;
    out->i = v;
    return absl::OkStatus();
  }

  absl::Status ReadArray(int depth, Value* out) {
    uint64_t at = c_.pos();
    if (depth >= kMaxArrayDepth)
      return c_.Fail(absl::StrCat("array at offset ", at, " is nested more than ", kMaxArrayDepth, " levels deep"));
    if (absl::Status s = ReadValueType(&out->elem_type, "array element type"); !s.ok()) return s;
    uint64_t count_at = c_.pos();
    uint64_t count = 0;
    if (absl::Status s = c_.Read(&count, "array count"); !s.ok()) return s;
    uint64_t min_elem = MinEncodedSize(out->elem_type);
    if (count > c_.remaining() / min_elem)
      return c_.Fail(absl::StrCat("array count ", count, " at offset ", count_at, " is impossible: ", c_.remaining(),
                                  " bytes left can hold at most ", c_.remaining() / min_elem, " ",
                                  ValueTypeName(out->elem_type), " elements (file size ", c_.size(), ")"));
    if (count > kMaxMetadataValues - values_)
      return c_.Fail(absl::StrCat("array count ", count, " at offset ", count_at, " exceeds the limit of ",
                                  kMaxMetadataValues, " metadata values in a file"));
    values_ += count;
    // The bound above keeps this proportional to the file size.
    out->array.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) {
      out->array.emplace_back();
      if (absl::Status s = ReadValue(out->elem_type, depth + 1, &out->array.back()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  Cursor& c_;
  uint64_t values_ = 0;
};

absl::Status CheckValueTypeFor(const std::string& path, absl::string_view key, const Value& v,
                               absl::string_view expected, bool ok) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": key ", Quoted(key), " has type ", ValueTypeName(v.type), ", expected ", expected));
}

// Converts an integer Value to T when it fits.
template <typename T>
bool IntegerAs(const Value& v, T* out) {
  if (IsUnsigned(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(v.u);
    return true;
  }
  if constexpr (std::is_signed_v<T>) {
    if (v.i < std::numeric_limits<T>::min() || v.i > std::numeric_limits<T>::max()) return false;
  } else {
    if (v.i < 0 || static_cast<uint64_t>(v.i) > std::numeric_limits<T>::max()) return false;
  }
  *out = static_cast<T>(v.i);
  return true;
}

template <typename T>
absl::StatusOr<T> GetInteger(const GgufFile& f, absl::string_view key, absl::string_view tname) {
  const Value* v = f.Find(key);
  if (!v) return absl::NotFoundError(absl::StrCat(f.path(), ": key ", Quoted(key), " not found"));
  if (absl::Status s = CheckValueTypeFor(f.path(), key, *v, "an integer", v->IsInteger()); !s.ok()) return s;
  T out;
  if (!IntegerAs(*v, &out))
    return absl::InvalidArgumentError(absl::StrCat(f.path(), ": key ", Quoted(key), ": value ", v->ToString(), " (",
                                                   ValueTypeName(v->type), ") does not fit in ", tname));
  return out;
}

}  // namespace

// --- TensorInfo ---

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : ne)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

std::vector<int64_t> TensorInfo::RowMajorShape() const { return {ne.rbegin(), ne.rend()}; }

// --- GgufFile ---

GgufFile::~GgufFile() {
  if (mapping_) ::munmap(mapping_, static_cast<size_t>(size_));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before fstat could refuse it (it
  // changes nothing for the regular file that is mapped below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    if (f->size_ > std::numeric_limits<size_t>::max()) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": file too large to map"));
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": mmap of ", f->size_, " bytes failed: ", std::strerror(err)));
    }
    f->mapping_ = p;
    f->base_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  if (absl::Status s = f->Parse(); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(absl::Span<const uint8_t> bytes, std::string label) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(label);
  f->owned_.assign(bytes.begin(), bytes.end());
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  if (absl::Status s = f->Parse(); !s.ok()) return s;
  return f;
}

absl::Status GgufFile::Parse() {
  Cursor c(base_, size_, path_);
  c.set_context(Cursor::Ctx::kHeader);
  if (size_ == 0) return c.Fail("empty file (0 bytes), not a GGUF file");

  // --- fixed header ---
  if (size_ < 4) return c.Need(4, "magic");
  uint32_t magic = 0;
  if (absl::Status s = c.Read(&magic, "magic"); !s.ok()) return s;
  if (magic != kGgufMagic) {
    std::string shown;
    for (int k = 0; k < 4; ++k) {
      unsigned char ch = static_cast<unsigned char>(magic >> (8 * k));
      shown += (ch >= 0x20 && ch < 0x7f) ? static_cast<char>(ch) : '.';
    }
    return c.Fail(absl::StrFormat("bad magic 0x%08x ('%s') at offset 0, expected 'GGUF'", magic, shown));
  }
  if (absl::Status s = c.Read(&version_, "version"); !s.ok()) return s;
  if (version_ == 0) return c.Fail("invalid version 0 at offset 4");
  if ((version_ & 0xFFFF) == 0)
    return c.Fail(
        absl::StrFormat("version 0x%08x at offset 4 looks byte-swapped (a big-endian GGUF file?); only "
                        "little-endian files are supported",
                        version_));
  if (version_ == 1) return c.Fail("unsupported version 1 at offset 4 (GGUF v1 is obsolete; v2 and v3 are supported)");
  if (version_ > 3)
    return c.Fail(absl::StrCat("unsupported version ", version_, " at offset 4 (v2 and v3 are supported)"));

  int64_t n_tensors = 0, n_kv = 0;
  if (absl::Status s = c.Read(&n_tensors, "n_tensors"); !s.ok()) return s;
  if (absl::Status s = c.Read(&n_kv, "n_kv"); !s.ok()) return s;
  if (n_tensors < 0) return c.Fail(absl::StrCat("negative n_tensors ", n_tensors, " at offset 8"));
  if (n_kv < 0) return c.Fail(absl::StrCat("negative n_kv ", n_kv, " at offset 16"));
  const uint64_t rest = c.remaining();
  if (static_cast<uint64_t>(n_tensors) > rest / kMinTensorInfoBytes)
    return c.Fail(absl::StrCat("n_tensors ", n_tensors, " at offset 8 is impossible: the ", rest,
                               " bytes after the header can hold at most ", rest / kMinTensorInfoBytes,
                               " tensor infos"));
  if (static_cast<uint64_t>(n_kv) > rest / kMinKvBytes)
    return c.Fail(absl::StrCat("n_kv ", n_kv, " at offset 16 is impossible: the ", rest,
                               " bytes after the header can hold at most ", rest / kMinKvBytes, " key/value pairs"));
  // Both fit individually, so neither product overflows.
  if (static_cast<uint64_t>(n_tensors) * kMinTensorInfoBytes + static_cast<uint64_t>(n_kv) * kMinKvBytes > rest)
    return c.Fail(absl::StrCat("n_tensors ", n_tensors, " and n_kv ", n_kv, " (offsets 8, 16) cannot both fit in the ",
                               rest, " bytes after the header"));

  // --- metadata ---
  MetadataReader mr(c);
  std::vector<uint64_t> kv_offsets;
  for (int64_t k = 0; k < n_kv; ++k) {
    const uint64_t at = c.pos();
    c.set_context(Cursor::Ctx::kKvIndex, at, {}, k, n_kv);
    std::string key;
    if (absl::Status s = c.ReadString(&key, "key", std::numeric_limits<uint64_t>::max()); !s.ok()) return s;
    if (key.empty()) return c.Fail(absl::StrCat("empty key at offset ", at));
    c.set_context(Cursor::Ctx::kKey, at, key);
    auto [it, inserted] = kv_index_.try_emplace(key, kv_.size());
    if (!inserted) return c.Fail(absl::StrCat("duplicate key (first defined at offset ", kv_offsets[it->second], ")"));
    ValueType t = ValueType::kU8;
    if (absl::Status s = mr.ReadValueType(&t, "value type"); !s.ok()) return s;
    Value v;
    if (absl::Status s = mr.ReadValue(t, 0, &v); !s.ok()) return s;
    kv_.emplace_back(std::move(key), std::move(v));
    kv_offsets.push_back(at);
  }

  // --- alignment ---
  c.set_context(Cursor::Ctx::kNone);
  alignment_ = kDefaultAlignment;
  if (auto it = kv_index_.find("general.alignment"); it != kv_index_.end()) {
    const Value& v = kv_[it->second].second;
    c.set_context(Cursor::Ctx::kKey, kv_offsets[it->second], kv_[it->second].first);
    if (v.type != ValueType::kU32)
      return c.Fail(absl::StrCat("alignment has type ", ValueTypeName(v.type), ", must be u32"));
    if (v.u == 0 || (v.u & (v.u - 1)) != 0)
      return c.Fail(absl::StrCat("alignment ", v.u, " is not a nonzero power of two"));
    alignment_ = static_cast<uint32_t>(v.u);
  }

  // --- tensor infos ---
  tensors_.reserve(static_cast<size_t>(n_tensors));  // bounded by the file size above
  for (int64_t k = 0; k < n_tensors; ++k) {
    const uint64_t at = c.pos();
    c.set_context(Cursor::Ctx::kTensorIndex, at, {}, k, n_tensors);
    TensorInfo ti;
    ti.info_offset = at;
    if (absl::Status s = c.ReadString(&ti.name, "tensor name", kMaxTensorNameBytes,
                                      " (ggml's GGML_MAX_NAME is 64 including the NUL)");
        !s.ok())
      return s;
    c.set_context(Cursor::Ctx::kTensor, at, ti.name);
    auto [it, inserted] = tensor_index_.try_emplace(ti.name, tensors_.size());
    if (!inserted)
      return c.Fail(
          absl::StrCat("duplicate tensor name (first defined at offset ", tensors_[it->second].info_offset, ")"));
    const uint64_t dims_at = c.pos();
    uint32_t n_dims = 0;
    if (absl::Status s = c.Read(&n_dims, "n_dims"); !s.ok()) return s;
    if (n_dims > kMaxDims)
      return c.Fail(absl::StrCat("n_dims ", n_dims, " at offset ", dims_at, " exceeds ", kMaxDims));
    ti.ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne_at = c.pos();
      if (absl::Status s = c.Read(&ti.ne[d], "ne"); !s.ok()) return s;
      if (ti.ne[d] < 0) return c.Fail(absl::StrCat("ne[", d, "] = ", ti.ne[d], " at offset ", ne_at, " is negative"));
    }
    const uint64_t type_at = c.pos();
    uint32_t type_id = 0;
    if (absl::Status s = c.Read(&type_id, "ggml type"); !s.ok()) return s;
    std::optional<GgmlTypeTraits> traits = LookupGgmlType(type_id);
    if (!traits)
      return c.Fail(absl::StrCat("unknown ggml type id ", static_cast<int32_t>(type_id), " at offset ", type_at));
    ti.type = traits->type;
    if (absl::Status s = c.Read(&ti.offset, "data offset"); !s.ok()) return s;

    // Element count and byte size, with overflow checks.
    int64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (__builtin_mul_overflow(elems, ti.ne[d], &elems))
        return c.Fail(absl::StrCat("shape ", ShapeString(ti.ne), " (ne at offset ", dims_at + 4,
                                   ") has more than 2^63-1 elements"));
    }
    const int64_t ne0 = n_dims > 0 ? ti.ne[0] : 1;
    if (ne0 % traits->block_elems != 0)
      return c.Fail(absl::StrCat("ne[0] = ", ne0, " (offset ", dims_at + 4, ") is not a multiple of the ", traits->name,
                                 " block size ", traits->block_elems));
    uint64_t nbytes = static_cast<uint64_t>(elems) / traits->block_elems;
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(traits->block_bytes), &nbytes))
      return c.Fail(absl::StrCat("byte size of shape ", ShapeString(ti.ne), " ", traits->name, " overflows 64 bits"));
    ti.nbytes = nbytes;
    tensors_.push_back(std::move(ti));
  }

  // --- data section ---
  c.set_context(Cursor::Ctx::kNone);
  const uint64_t infos_end = c.pos();
  if (!AlignUp(infos_end, alignment_, &data_offset_)) return c.Fail("data section offset overflows");
  // A file without tensor data may end before the padding (llama.cpp accepts that too).
  bool any_data = false;
  for (const TensorInfo& ti : tensors_) any_data |= ti.nbytes != 0;
  if (data_offset_ > size_ && any_data)
    return c.Fail(absl::StrCat("data section offset ", data_offset_, " (tensor infos end at ", infos_end,
                               ", padded to alignment ", alignment_, ") is past end of file (size ", size_, ")"));

  uint64_t expected = 0;  // running sum of padded sizes
  for (size_t k = 0; k < tensors_.size(); ++k) {
    TensorInfo& ti = tensors_[k];
    c.set_context(Cursor::Ctx::kTensor, ti.info_offset, ti.name);
    if (ti.offset % alignment_ != 0)
      return c.Fail(absl::StrCat("data offset ", ti.offset, " is not a multiple of the alignment ", alignment_));
    if (ti.offset < expected)
      return c.Fail(absl::StrCat("data offset ", ti.offset, " overlaps the previous tensor ",
                                 Quoted(tensors_[k - 1].name), " whose data (padded to ", alignment_,
                                 ") ends at data offset ", expected));
    if (ti.offset > expected)
      return c.Fail(absl::StrCat("data offset ", ti.offset, " leaves a gap: expected ", expected,
                                 " (tensor data must be packed in info order, each padded to the "
                                 "alignment ",
                                 alignment_, ")"));
    if (ti.nbytes == 0) {
      ti.data = {};
    } else {
      // data_offset_ <= size_ here (nonzero data); check begin and end without overflow.
      const uint64_t room = size_ - data_offset_;
      if (ti.offset > room || ti.nbytes > room - ti.offset) {
        uint64_t begin = data_offset_ + ti.offset;  // offset <= expected <= sum of sizes: no wrap
        uint64_t end;
        std::string end_str = __builtin_add_overflow(begin, ti.nbytes, &end) ? std::string("2^64+") : absl::StrCat(end);
        return c.Fail(absl::StrCat("data [", begin, ", ", end_str, ") extends past end of file (size ", size_,
                                   "); the tensor is ", GgmlTypeName(ti.type), " ", ShapeString(ti.ne), ", ", ti.nbytes,
                                   " bytes"));
      }
      ti.data = absl::Span<const uint8_t>(base_ + data_offset_ + ti.offset, static_cast<size_t>(ti.nbytes));
    }
    uint64_t padded;
    if (!AlignUp(ti.nbytes, alignment_, &padded) || __builtin_add_overflow(expected, padded, &expected))
      return c.Fail("running data size overflows 64 bits");
  }
  return absl::OkStatus();
}

// --- metadata accessors ---

const Value* GgufFile::Find(absl::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

absl::StatusOr<uint32_t> GgufFile::GetU32(absl::string_view key) const {
  return GetInteger<uint32_t>(*this, key, "u32");
}
absl::StatusOr<uint64_t> GgufFile::GetU64(absl::string_view key) const {
  return GetInteger<uint64_t>(*this, key, "u64");
}
absl::StatusOr<int32_t> GgufFile::GetI32(absl::string_view key) const { return GetInteger<int32_t>(*this, key, "i32"); }
absl::StatusOr<int64_t> GgufFile::GetI64(absl::string_view key) const { return GetInteger<int64_t>(*this, key, "i64"); }

absl::StatusOr<const Value*> GgufFile::FindTyped(absl::string_view key, absl::string_view expected,
                                                 bool (*accept)(const Value&)) const {
  const Value* v = Find(key);
  if (!v) return absl::NotFoundError(absl::StrCat(path_, ": key ", Quoted(key), " not found"));
  if (absl::Status s = CheckValueTypeFor(path_, key, *v, expected, accept(*v)); !s.ok()) return s;
  return v;
}

absl::StatusOr<float> GgufFile::GetF32(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, "f32 or f64", [](const Value& x) {
                           return x.type == ValueType::kF32 || x.type == ValueType::kF64;
                         }));
  return static_cast<float>(v->f);
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v,
                         FindTyped(key, "bool", [](const Value& x) { return x.type == ValueType::kBool; }));
  return v->u != 0;
}

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v,
                         FindTyped(key, "string", [](const Value& x) { return x.type == ValueType::kString; }));
  return v->s;
}

absl::StatusOr<const Value*> GgufFile::GetArray(absl::string_view key) const {
  return FindTyped(key, "array", [](const Value& x) { return x.type == ValueType::kArray; });
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, "array of string", [](const Value& x) {
                           return x.type == ValueType::kArray && x.elem_type == ValueType::kString;
                         }));
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(e.s);
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, "array of integers", [](const Value& x) {
                           if (x.type != ValueType::kArray) return false;
                           Value probe;
                           probe.type = x.elem_type;
                           return probe.IsInteger();
                         }));
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (size_t k = 0; k < v->array.size(); ++k) {
    int64_t x;
    if (!IntegerAs(v->array[k], &x))
      return absl::InvalidArgumentError(absl::StrCat(path_, ": key ", Quoted(key), ": element ", k, " = ",
                                                     v->array[k].ToString(), " does not fit in i64"));
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetF32Array(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, "array of f32 or f64", [](const Value& x) {
                           return x.type == ValueType::kArray &&
                                  (x.elem_type == ValueType::kF32 || x.elem_type == ValueType::kF64);
                         }));
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(static_cast<float>(e.f));
  return out;
}

absl::StatusOr<std::vector<bool>> GgufFile::GetBoolArray(absl::string_view key) const {
  MEMRA_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, "array of bool", [](const Value& x) {
                           return x.type == ValueType::kArray && x.elem_type == ValueType::kBool;
                         }));
  std::vector<bool> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(e.u != 0);
  return out;
}

absl::StatusOr<uint32_t> GgufFile::GetU32Or(absl::string_view key, uint32_t def) const {
  if (!Has(key)) return def;
  return GetU32(key);
}
absl::StatusOr<float> GgufFile::GetF32Or(absl::string_view key, float def) const {
  if (!Has(key)) return def;
  return GetF32(key);
}
absl::StatusOr<bool> GgufFile::GetBoolOr(absl::string_view key, bool def) const {
  if (!Has(key)) return def;
  return GetBool(key);
}
absl::StatusOr<std::string> GgufFile::GetStringOr(absl::string_view key, std::string def) const {
  if (!Has(key)) return def;
  return GetString(key);
}

// --- tensors ---

const TensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const TensorInfo*> GgufFile::GetTensor(absl::string_view name) const {
  const TensorInfo* t = FindTensor(name);
  if (!t) return absl::NotFoundError(absl::StrCat(path_, ": tensor ", Quoted(name), " not found"));
  return t;
}

std::string ShapeString(absl::Span<const int64_t> ne) {
  std::string out = "{";
  for (size_t k = 0; k < ne.size(); ++k) absl::StrAppend(&out, k ? ", " : "", ne[k]);
  out += '}';
  return out;
}

}  // namespace memra::gguf
