#!/usr/bin/env python3
"""Writes the seed corpus of gguf_reader_fuzz: small valid GGUF files (< 4 KiB each).

Run from anywhere: python3 tests/fuzz/make_gguf_corpus.py. Standard library only; the files are
committed, so this only needs rerunning when the seeds should change.
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")

# GGUF metadata value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FORMATS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
                  BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# GGML tensor types: id -> (values per block, bytes per block).
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20),
        "q5_0": (6, 32, 22), "q5_1": (7, 32, 24), "q8_0": (8, 32, 34), "q4_k": (12, 256, 144),
        "q5_k": (13, 256, 176), "q6_k": (14, 256, 210), "bf16": (30, 1, 2)}


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype, value):
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(encode_value(etype, item) for item in items)
    return struct.pack(SCALAR_FORMATS[vtype], value)


def gguf_file(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, type_name, data_bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + encode_value(vtype, value)
    offsets, next_offset = [], 0
    for _, _, _, data in tensors:
        offsets.append(next_offset)
        next_offset = -(-(next_offset + len(data)) // alignment) * alignment
    for (name, dims, tname, _), offset in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", GGML[tname][0], offset)
    if tensors:
        out += b"\0" * (-len(out) % alignment)
        data_start = len(out)
        for (_, _, _, data), offset in zip(tensors, offsets):
            out += b"\0" * (data_start + offset - len(out)) + data
    return out


def pseudo_bytes(n, seed):
    """Deterministic bytes; every 16-bit word keeps a small exponent so fp16 scales stay finite."""
    out = bytearray()
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x >> 16) & 0xFF)
    for i in range(1, n, 2):
        out[i] &= 0x3B
    return bytes(out)


def f32s(values):
    return b"".join(struct.pack("<f", v) for v in values)


def tiny_model(arch, d=8, heads=2, kv_heads=1, ff=8, vocab=4, layers=1):
    head_dim = d // heads
    kvs = [("general.architecture", STRING, arch), ("general.name", STRING, "seed"),
           (f"{arch}.block_count", U32, layers), (f"{arch}.embedding_length", U32, d),
           (f"{arch}.feed_forward_length", U32, ff), (f"{arch}.attention.head_count", U32, heads),
           (f"{arch}.attention.head_count_kv", U32, kv_heads),
           (f"{arch}.context_length", U32, 64),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5),
           (f"{arch}.rope.freq_base", F32, 10000.0),
           (f"{arch}.rope.dimension_count", U32, head_dim)]
    counter = [0.0]

    def f32_tensor(name, dims):
        n = 1
        for dim in dims:
            n *= dim
        counter[0] += 1.0
        return (name, dims, "f32", f32s([counter[0] + i / 64 for i in range(n)]))

    q, kv = heads * head_dim, kv_heads * head_dim
    tensors = [f32_tensor("token_embd.weight", [d, vocab]), f32_tensor("output_norm.weight", [d])]
    for layer in range(layers):
        p = f"blk.{layer}."
        tensors += [f32_tensor(p + "attn_norm.weight", [d]), f32_tensor(p + "attn_q.weight", [d, q]),
                    f32_tensor(p + "attn_k.weight", [d, kv]), f32_tensor(p + "attn_v.weight", [d, kv]),
                    f32_tensor(p + "attn_output.weight", [q, d])]
        if arch == "qwen2":
            tensors += [f32_tensor(p + "attn_q.bias", [q]), f32_tensor(p + "attn_k.bias", [kv]),
                        f32_tensor(p + "attn_v.bias", [kv])]
        tensors += [f32_tensor(p + "ffn_norm.weight", [d]), f32_tensor(p + "ffn_gate.weight", [d, ff]),
                    f32_tensor(p + "ffn_up.weight", [d, ff]), f32_tensor(p + "ffn_down.weight", [ff, d])]
    return gguf_file(kvs, tensors)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    seeds["metadata_all_types.gguf"] = gguf_file([
        ("general.architecture", STRING, "llama"), ("t.u8", U8, 7), ("t.i8", I8, -7),
        ("t.u16", U16, 700), ("t.i16", I16, -700), ("t.u32", U32, 70000), ("t.i32", I32, -70000),
        ("t.f32", F32, 0.5), ("t.bool", BOOL, 1), ("t.u64", U64, 2**40), ("t.i64", I64, -2**40),
        ("t.f64", F64, 1e-3), ("t.strings", ARRAY, (STRING, ["a", "bc", ""])),
        ("t.floats", ARRAY, (F32, [1.0, -2.5])), ("t.ints", ARRAY, (I32, [1, -2, 3])),
        ("t.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"])])),
    ], [])
    small = [(f"{name}", [32], name, pseudo_bytes(32 // GGML[name][1] * GGML[name][2], i))
             for i, name in enumerate(["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])]
    seeds["tensor_types_32.gguf"] = gguf_file([("general.alignment", U32, 32)], small)
    k_quants = [(name, [256], name, pseudo_bytes(GGML[name][2], 40 + i))
                for i, name in enumerate(["q4_k", "q5_k", "q6_k"])]
    seeds["tensor_types_k.gguf"] = gguf_file([], k_quants, alignment=32)
    seeds["v2_alignment_64.gguf"] = gguf_file(
        [("general.alignment", U32, 64)],
        [("a", [4, 2], "f32", f32s(range(8))), ("b", [32, 2], "q8_0", pseudo_bytes(68, 9))],
        version=2, alignment=64)
    seeds["tiny_llama.gguf"] = tiny_model("llama")
    seeds["tiny_qwen2.gguf"] = tiny_model("qwen2")
    for name, data in seeds.items():
        assert len(data) < 4096, (name, len(data))
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
