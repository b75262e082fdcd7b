#!/usr/bin/env python3
"""Generates the malformed-GGUF regression corpus (this folder) and the valid fuzz seeds
(tests/fuzz/seeds/). Standard library only; deterministic. Re-run after changing it:

    python3 tests/data/gguf_malformed/make_corpus.py

Each malformed file differs from a small valid file in one way. README.md (also written here)
lists every file with the substring its error message must contain; tests/gguf/GgufMalformed_test.cc
reads that table.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.normpath(os.path.join(HERE, "..", "..", "fuzz", "seeds"))

# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# ggml types
GF32, GF16, GQ4_0, GQ8_0, GQ4_K, GBF16 = 0, 1, 2, 8, 12, 30


def u8(x): return struct.pack("<B", x)
def u16(x): return struct.pack("<H", x)
def u32(x): return struct.pack("<I", x)
def i32(x): return struct.pack("<i", x)
def u64(x): return struct.pack("<Q", x)
def i64(x): return struct.pack("<q", x)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + u32(vtype) + payload


def kv_str(key, s):
    return kv(key, STRING, gstr(s))


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + i64(n_tensors) + i64(n_kv)


def tinfo(name, ne, gtype, offset):
    return gstr(name) + u32(len(ne)) + b"".join(i64(d) for d in ne) + u32(gtype) + u64(offset)


def pad_to(b, align):
    return b + b"\0" * ((-len(b)) % align)


def data_bytes(n, seed):
    return bytes((seed * 31 + 7 * k) & 0xFF for k in range(n))


class File:
    """A GGUF image assembled piece by piece; `mark()` records byte offsets for the README."""

    def __init__(self, n_tensors, n_kv, version=3, magic=b"GGUF"):
        self.b = header(n_tensors, n_kv, version, magic)

    def add(self, piece):
        at = len(self.b)
        self.b += piece
        return at

    def pad(self, align=32):
        self.b = pad_to(self.b, align)


ARCH = kv_str("general.architecture", "test")


def valid_two_tensors(align=32):
    """general.architecture + tensors a (f32 {8}) and b (f32 {4, 2}): the base of most cases."""
    f = File(2, 1)
    f.add(ARCH)
    f.add(tinfo("a", [8], GF32, 0))
    f.add(tinfo("b", [4, 2], GF32, 32))
    f.pad(align)
    f.add(data_bytes(32, 1))
    f.add(data_bytes(32, 2))
    return f.b


cases = []  # (file name, expected substring, description)


def case(name, data, expect, what):
    assert "|" not in expect and "`" not in expect, name
    cases.append((name, data, expect, what))


# --- header ---
case("empty.gguf", b"", "empty file", "zero bytes")
case("tiny_2_bytes.gguf", b"GG", "magic at offset 0: truncated file", "shorter than the magic")
case("truncated_header.gguf", b"GGUF" + u32(3) + b"\1\0\0\0",
     "n_tensors at offset 8: truncated file", "ends inside n_tensors")
case("truncated_n_kv.gguf", b"GGUF" + u32(3) + i64(0) + b"\0\0",
     "n_kv at offset 16: truncated file", "ends inside n_kv")
case("bad_magic.gguf", b"GGML" + valid_two_tensors()[4:], "bad magic 0x4c4d4747 ('GGML')",
     "magic GGML instead of GGUF")
case("bad_magic_lowercase.gguf", b"gguf" + valid_two_tensors()[4:], "bad magic",
     "magic in lower case")
for v, expect in [(0, "invalid version 0"), (1, "unsupported version 1"),
                  (4, "unsupported version 4"), (0x03000000, "looks byte-swapped"),
                  (0xFFFFFFFF, "unsupported version 4294967295")]:
    b = bytearray(valid_two_tensors())
    b[4:8] = u32(v)
    name = "version_byteswapped.gguf" if v == 0x03000000 else (
        "version_max.gguf" if v == 0xFFFFFFFF else "version_%d.gguf" % v)
    case(name, bytes(b), expect, "version field 0x%08x" % v)
case("n_kv_absurd.gguf", header(0, 1 << 62) + ARCH,
     "n_kv 4611686018427387904 at offset 16 is impossible", "n_kv = 2^62")
case("n_tensors_absurd.gguf", header(1 << 62, 1) + ARCH,
     "n_tensors 4611686018427387904 at offset 8 is impossible", "n_tensors = 2^62")
case("n_kv_negative.gguf", header(0, -1) + ARCH, "negative n_kv -1 at offset 16", "n_kv = -1")
case("n_tensors_negative.gguf", header(-5, 1) + ARCH, "negative n_tensors -5 at offset 8",
     "n_tensors = -5")
case("counts_together_too_big.gguf", header(3, 3) + ARCH + b"\0" * 40,
     "cannot both fit", "n_tensors and n_kv each plausible, not both")

# --- metadata ---
f = File(0, 1)
at = f.add(u64(1 << 40))
case("key_length_past_eof.gguf", f.b + b"general", "key length 1099511627776 at offset 24 extends "
     "past end of file", "key length 2^40")
case("empty_key.gguf", header(0, 1) + kv("", U32, u32(1)), "empty key at offset 24",
     "zero-length key")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("general.name") + u32(STRING))
f.add(u64(1000) + b"abc")
case("string_past_eof.gguf", f.b, "string value length 1000 at offset %d extends past end of file"
     % (at + len(gstr("general.name")) + 4), "string value claims 1000 bytes, 3 present")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("x") + u32(U32) + b"\1\2")
case("truncated_value.gguf", f.b, "integer value at offset %d: truncated file" % (at + 13),
     "file ends inside a u32 value")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("x") + u32(13) + u32(0))
case("unknown_value_type.gguf", f.b, "unknown value type 13 at offset %d" % (at + 9),
     "value type 13")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("x") + u32(0x80000000) + u32(0))
case("negative_value_type.gguf", f.b, "unknown value type -2147483648", "value type -2^31")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("arr") + u32(ARRAY))
f.add(u32(U32) + u64(1 << 62) + u32(1) * 4)
case("array_count_absurd.gguf", f.b, "array count 4611686018427387904 at offset %d is impossible"
     % (at + 15 + 4), "u32 array with 2^62 elements")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("tok") + u32(ARRAY))
f.add(u32(STRING) + u64(1 << 58) + gstr("a") + gstr("b"))
case("string_array_count_absurd.gguf", f.b, "array count 288230376151711744 at offset %d is "
     "impossible" % (at + 15 + 4), "string array with 2^58 elements")
f = File(0, 2)
f.add(ARCH)
at = f.add(gstr("tok") + u32(ARRAY))
f.add(u32(STRING) + u64(3) + gstr("a") + gstr("b") + u64(1 << 33) + b"c")
case("string_array_elem_past_eof.gguf", f.b, "string value length 8589934592",
     "third string of an array claims 2^33 bytes")
f = File(0, 2)
f.add(ARCH)
f.add(gstr("arr") + u32(ARRAY) + u32(99) + u64(1) + u32(0))
case("unknown_array_elem_type.gguf", f.b, "unknown array element type 99",
     "array element type 99")


def nested(depth):
    """An array nested `depth` levels deep, innermost [u8 7]."""
    return (u32(ARRAY) + u64(1)) * (depth - 1) + u32(U8) + u64(1) + u8(7)


f = File(0, 2)
f.add(ARCH)
f.add(gstr("deep") + u32(ARRAY) + nested(9))
case("nested_array_too_deep.gguf", f.b, "is nested more than 8 levels deep",
     "array nested 9 levels (limit 8)")
f = File(0, 2)
f.add(ARCH)
f.add(gstr("deep") + u32(ARRAY) + nested(2000))
case("nested_array_very_deep.gguf", f.b, "is nested more than 8 levels deep",
     "array nested 2000 levels (stack exhaustion attempt)")
f = File(0, 2)
f.add(ARCH)
f.add(gstr("nest") + u32(ARRAY) + u32(ARRAY) + u64(1 << 50) + u32(U8) + u64(0))
case("nested_array_count_absurd.gguf", f.b, "array count 1125899906842624",
     "array of arrays with 2^50 elements")
f = File(0, 2)
at = f.add(ARCH)
at2 = f.add(kv_str("general.architecture", "again"))
case("duplicate_key.gguf", f.b, "key 'general.architecture' (at offset %d): duplicate key (first "
     "defined at offset %d)" % (at2, at), "general.architecture twice")
for name, vtype, payload, expect in [
        ("alignment_u64.gguf", U64, u64(32), "alignment has type u64, must be u32"),
        ("alignment_i32.gguf", I32, i32(32), "alignment has type i32, must be u32"),
        ("alignment_string.gguf", STRING, gstr("32"), "alignment has type string, must be u32"),
        ("alignment_zero.gguf", U32, u32(0), "alignment 0 is not a nonzero power of two"),
        ("alignment_48.gguf", U32, u32(48), "alignment 48 is not a nonzero power of two")]:
    f = File(1, 2)
    f.add(ARCH)
    f.add(kv("general.alignment", vtype, payload))
    f.add(tinfo("a", [8], GF32, 0))
    f.pad(64)
    f.add(data_bytes(32, 1))
    case(name, f.b, expect, "general.alignment: %s" % expect.split(" ", 1)[1])

# --- tensor infos ---
def tensors_file(infos, n_data=64, align=32, extra_kv=b"", n_kv=1, n_tensors=None):
    f = File(len(infos) if n_tensors is None else n_tensors, n_kv)
    f.add(ARCH + extra_kv)
    offs = [f.add(t) for t in infos]
    f.pad(align)
    f.add(data_bytes(n_data, 3))
    return f.b, offs


b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("a", [8], GF32, 32)])
case("duplicate_tensor.gguf", b, "tensor 'a' (info at offset %d): duplicate tensor name (first "
     "defined at offset %d)" % (offs[1], offs[0]), "tensor 'a' twice")
b, offs = tensors_file([tinfo("t" * 64, [8], GF32, 0)])
case("tensor_name_too_long.gguf", b, "tensor name length 64 at offset %d exceeds 63 bytes" % offs[0],
     "64-byte tensor name (GGML_MAX_NAME 64 incl. NUL)")
b, offs = tensors_file([tinfo("t" * 63, [8], GF32, 0)])
# (63 bytes is the longest legal name; this one is fine, so it goes to the seeds instead.)
valid_name63 = b
f = File(1, 1)
f.add(ARCH)
at = f.add(u64(50) + b"blk.0")
case("tensor_name_past_eof.gguf", f.b, "tensor name length 50 at offset %d extends past end of "
     "file" % at, "tensor name claims 50 bytes, 5 present")
f = File(1, 1)
f.add(ARCH)
at = f.add(u64(1 << 63))
case("tensor_name_length_huge.gguf", f.b, "tensor name length 9223372036854775808 at offset %d "
     "exceeds 63 bytes" % at, "tensor name length 2^63")
b, offs = tensors_file([gstr("w") + u32(5) + i64(1) * 5 + u32(GF32) + u64(0)])
case("n_dims_5.gguf", b, "tensor 'w' (info at offset %d): n_dims 5 at offset %d exceeds 4"
     % (offs[0], offs[0] + 9), "five dimensions")
b, offs = tensors_file([gstr("w") + u32(0xFFFFFFFF) + i64(1) + u32(GF32) + u64(0)])
case("n_dims_huge.gguf", b, "n_dims 4294967295", "n_dims = 2^32-1")
b, offs = tensors_file([tinfo("w", [8, -4], GF32, 0)])
case("ne_negative.gguf", b, "ne[1] = -4 at offset %d is negative" % (offs[0] + 9 + 4 + 8),
     "ne = {8, -4}")
b, offs = tensors_file([tinfo("w", [1 << 32, 1 << 32, 1 << 32], GF32, 0)])
case("ne_product_overflow.gguf", b, "has more than 2^63-1 elements", "ne = {2^32, 2^32, 2^32}")
b, offs = tensors_file([tinfo("w", [1 << 62], GF32, 0)])
case("nbytes_overflow.gguf", b, "byte size of shape {4611686018427387904} f32 overflows 64 bits",
     "2^62 f32 elements = 2^64 bytes")
b, offs = tensors_file([tinfo("w", [1 << 40, 1 << 20], GF32, 0)])
case("nbytes_huge.gguf", b, "extends past end of file", "2^60 f32 elements: 4 EiB of data")
b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("blk.0.attn_q.weight", [32, 2], 4, 32)])
case("unknown_ggml_type.gguf", b, "tensor 'blk.0.attn_q.weight' (info at offset %d): unknown ggml "
     "type id 4 at offset %d" % (offs[1], offs[1] + len(gstr("blk.0.attn_q.weight")) + 4 + 16),
     "ggml type 4 (retired Q4_2)")
b, offs = tensors_file([tinfo("w", [8], 43, 0)])
case("unknown_ggml_type_43.gguf", b, "tensor 'w' (info at offset %d): unknown ggml type id 43"
     % offs[0], "ggml type 43 (GGML_TYPE_COUNT)")
b, offs = tensors_file([tinfo("w", [8], 0xFFFFFFFF, 0)])
case("unknown_ggml_type_negative.gguf", b, "unknown ggml type id -1", "ggml type -1")
b, offs = tensors_file([tinfo("w", [33, 1], GQ8_0, 0)])
case("ne0_not_multiple_of_block.gguf", b, "ne[0] = 33 (offset %d) is not a multiple of the q8_0 "
     "block size 32" % (offs[0] + 13), "q8_0 row of 33 elements")
b, offs = tensors_file([tinfo("w", [128, 2], GQ4_K, 0)], n_data=288)
case("ne0_not_multiple_of_kblock.gguf", b, "is not a multiple of the q4_K block size 256",
     "q4_K row of 128 elements")
f = File(2, 1)
f.add(ARCH)
f.add(tinfo("w", [8], GF32, 0))
at = f.add(u64(2) + b"w2" + u32(2) + i64(4))
case("truncated_tensor_info.gguf", f.b, "tensor 'w2' (info at offset %d): ne at offset %d: "
     "truncated file" % (at, at + 22), "file ends inside ne[1]")

# --- data section ---
b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("b", [8], GF32, 16)])
case("offset_misaligned.gguf", b, "tensor 'b' (info at offset %d): data offset 16 is not a "
     "multiple of the alignment 32" % offs[1], "second tensor at data offset 16")
b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("b", [8], GF32, 0)])
case("offset_overlap.gguf", b, "data offset 0 overlaps the previous tensor 'a'",
     "both tensors at data offset 0")
b, offs = tensors_file([tinfo("a", [16], GF32, 0), tinfo("b", [8], GF32, 32)], n_data=96)
case("offset_overlap_partial.gguf", b, "data offset 32 overlaps the previous tensor 'a' whose data "
     "(padded to 32) ends at data offset 64", "tensor b starts inside tensor a")
b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("b", [8], GF32, 64)], n_data=96)
case("offset_gap.gguf", b, "data offset 64 leaves a gap: expected 32", "a 32-byte hole")
b, offs = tensors_file([tinfo("a", [8], GF32, 32), tinfo("b", [8], GF32, 0)], n_data=64)
case("offset_reordered.gguf", b, "tensor 'a' (info at offset %d): data offset 32 leaves a gap: "
     "expected 0" % offs[0], "data in reverse info order")
b, offs = tensors_file([tinfo("a", [8], GF32, 1 << 63)], n_data=64)
case("offset_huge.gguf", b, "data offset 9223372036854775808 leaves a gap", "offset 2^63")
b, offs = tensors_file([tinfo("a", [8], GF32, 0), tinfo("blk.0.attn_q.weight", [64, 4], GF32, 32)])
data_off = len(pad_to(b[:offs[1] + len(tinfo("blk.0.attn_q.weight", [64, 4], GF32, 32))], 32))
case("data_past_eof.gguf", b, "tensor 'blk.0.attn_q.weight' (info at offset %d): data [%d, %d) "
     "extends past end of file (size %d)" % (offs[1], data_off + 32, data_off + 32 + 1024, len(b)),
     "second tensor's 1024 bytes run past the end")
b = valid_two_tensors()
case("data_truncated_by_one.gguf", b[:-1], "extends past end of file (size %d)" % (len(b) - 1),
     "valid file minus its last byte")
f = File(1, 1)
f.add(ARCH)
f.add(tinfo("a", [8], GF32, 0))
end = len(f.b)
case("data_section_past_eof.gguf", f.b, "data section offset %d (tensor infos end at %d, padded "
     "to alignment 32) is past end of file" % (len(pad_to(f.b, 32)), end),
     "file ends right after the tensor infos")
f = File(1, 2)
f.add(ARCH)
f.add(kv("general.alignment", U32, u32(1 << 31)))
f.add(tinfo("a", [8], GF32, 0))
case("alignment_2g_past_eof.gguf", f.b, "padded to alignment 2147483648) is past end of file",
     "alignment 2^31: the data section would start 2 GiB in")

# --- valid fuzz seeds ---
seeds = {}
seeds["valid_two_tensors.gguf"] = valid_two_tensors()
seeds["valid_name63.gguf"] = valid_name63
f = File(0, 2, version=2)
f.add(ARCH)
f.add(kv("general.name", STRING, gstr("v2 without tensors")))
seeds["valid_v2_no_tensors.gguf"] = f.b
# every value type, nested arrays up to the depth limit, string arrays, alignment 64,
# quantized and zero-sized tensors
f = File(4, 17)
f.add(ARCH)
f.add(kv("general.alignment", U32, u32(64)))
for key, vt, payload in [("u8", U8, u8(200)), ("i8", I8, struct.pack("<b", -100)),
                         ("u16", U16, u16(60000)), ("i16", I16, struct.pack("<h", -30000)),
                         ("u32", U32, u32(4000000000)), ("i32", I32, i32(-2000000000)),
                         ("f32", F32, struct.pack("<f", 1.5)), ("bool", BOOL, u8(1)),
                         ("str", STRING, gstr("hello")), ("u64", U64, u64(1 << 63)),
                         ("i64", I64, i64(-(1 << 62))), ("f64", F64, struct.pack("<d", -2.25))]:
    f.add(kv("t." + key, vt, payload))
f.add(kv("t.strings", ARRAY, u32(STRING) + u64(3) + gstr("a") + gstr("") + gstr("ccc")))
f.add(kv("t.nested", ARRAY, nested(8)))
f.add(kv("t.empty", ARRAY, u32(I32) + u64(0)))
f.add(tinfo("w.f32", [4, 2], GF32, 0))
f.add(tinfo("w.q8_0", [32, 2], GQ8_0, 64))
f.add(tinfo("w.empty", [0, 3], GF16, 192))
f.add(tinfo("w.q4_0", [64], GQ4_0, 192))
f.pad(64)
f.add(pad_to(data_bytes(32, 4), 64) + pad_to(data_bytes(68, 5), 64) + data_bytes(36, 6))
seeds["valid_all_kinds.gguf"] = f.b

# --- write ---
os.makedirs(SEEDS, exist_ok=True)
names = set()
for name, data, expect, what in cases:
    assert name not in names, name
    names.add(name)
    with open(os.path.join(HERE, name), "wb") as fh:
        fh.write(data)
for name, data in seeds.items():
    with open(os.path.join(SEEDS, name), "wb") as fh:
        fh.write(data)
with open(os.path.join(HERE, "README.md"), "w") as fh:
    fh.write("# Malformed GGUF corpus\n\n"
             "Small hostile files, each differing from a valid file in one way. Generated by\n"
             "`make_corpus.py` (python stdlib only; also writes the valid fuzz seeds in\n"
             "`tests/fuzz/seeds/`). `tests/gguf/GgufMalformed_test.cc` opens every file and expects an\n"
             "error whose message contains the substring below; it reads this table, so every\n"
             "`*.gguf` here needs a row.\n\n"
             "| file | expected error substring | what is wrong |\n|---|---|---|\n")
    for name, data, expect, what in cases:
        fh.write("| `%s` | `%s` | %s (%d bytes) |\n" % (name, expect, what, len(data)))
print("%d malformed files, %d seeds" % (len(cases), len(seeds)))
