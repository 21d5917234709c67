#!/usr/bin/env python3
"""Converts Silero VAD's ONNX model (silero_vad.onnx of the PyPI package
silero-vad 6.x) into the file core/vad.c loads: the 16 kHz network's 15
tensors, f32, in the safetensors layout (an 8-byte little-endian header
length, a JSON header naming each tensor's dtype, shape and byte range,
then the data), under our names, with __metadata__ {"format":
"whisperd-silero-vad", "version": "1"}.

usage: vad_convert.py SILERO_VAD_ONNX OUT

Standard library only: ONNX is protobuf, and the fields needed here are few
(ModelProto.graph 7; GraphProto.node 1; NodeProto.output 2, op_type 4,
attribute 5; AttributeProto.name 1, t 5, g 6; TensorProto.dims 1,
data_type 2, float_data 4, raw_data 9). The weights are Constant nodes in
the then-branch of the graph's first If (sample rate == 16000), named
"<branch prefix><torch name>".
"""
import json
import struct
import sys

# Our name, the name in the ONNX export, and the shape core/vad.c expects.
TENSORS = [
    ("stft.basis", "stft.forward_basis_buffer", (258, 1, 256)),
    ("conv0.weight", "encoder.0.reparam_conv.weight", (128, 129, 3)),
    ("conv0.bias", "encoder.0.reparam_conv.bias", (128,)),
    ("conv1.weight", "encoder.1.reparam_conv.weight", (64, 128, 3)),
    ("conv1.bias", "encoder.1.reparam_conv.bias", (64,)),
    ("conv2.weight", "encoder.2.reparam_conv.weight", (64, 64, 3)),
    ("conv2.bias", "encoder.2.reparam_conv.bias", (64,)),
    ("conv3.weight", "encoder.3.reparam_conv.weight", (128, 64, 3)),
    ("conv3.bias", "encoder.3.reparam_conv.bias", (128,)),
    ("lstm.weight_ih", "decoder.rnn.weight_ih", (512, 128)),
    ("lstm.weight_hh", "decoder.rnn.weight_hh", (512, 128)),
    ("lstm.bias_ih", "decoder.rnn.bias_ih", (512,)),
    ("lstm.bias_hh", "decoder.rnn.bias_hh", (512,)),
    ("out.weight", "decoder.decoder.2.weight", (1, 128, 1)),
    ("out.bias", "decoder.decoder.2.bias", (1,)),
]


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field number, wire type, value) of each field of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("protobuf wire type %d not supported" % wt)
        yield num, wt, v


def first(buf, num):
    for n, _, v in fields(buf):
        if n == num:
            return v
    return None


def tensor(buf):
    """(dims, data_type, raw little-endian bytes) of a TensorProto."""
    dims, dtype, data, floats = [], 0, None, []
    for n, wt, v in fields(buf):
        if n == 1 and wt == 0:
            dims.append(v)
        elif n == 1 and wt == 2:  # packed dims
            j = 0
            while j < len(v):
                d, j = varint(v, j)
                dims.append(d)
        elif n == 2:
            dtype = v
        elif n == 9:
            data = bytes(v)
        elif n == 4 and wt == 2:
            floats.append(bytes(v))
        elif n == 4 and wt == 5:
            floats.append(bytes(v))
    if data is None:
        data = b"".join(floats)
    return tuple(dims), dtype, data


def constants_16k(model):
    graph = first(model, 7)
    for n, _, node in fields(graph):
        if n != 1 or bytes(first(node, 4) or b"") != b"If":
            continue
        for an, _, attr in fields(node):
            if an == 5 and bytes(first(attr, 1)) == b"then_branch":
                sub = first(attr, 6)
                out = {}
                for sn, _, snode in fields(sub):
                    if sn != 1 or bytes(first(snode, 4) or b"") != b"Constant":
                        continue
                    name = bytes(first(snode, 2)).decode()
                    for vn, _, vattr in fields(snode):
                        if vn == 5 and bytes(first(vattr, 1)) == b"value":
                            out[name] = tensor(first(vattr, 5))
                return out
    raise ValueError("no If node with a then_branch: not a Silero VAD v5/v6 export")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        model = memoryview(f.read())
    consts = constants_16k(model)
    header, blobs, off = {}, [], 0
    for ours, theirs, shape in TENSORS:
        hits = [v for k, v in consts.items() if k == theirs or k.endswith("__" + theirs)]
        if len(hits) != 1:
            sys.exit("vad_convert: %s: found %d tensors named %s" % (sys.argv[1], len(hits), theirs))
        dims, dtype, data = hits[0]
        if dtype != 1:
            sys.exit("vad_convert: %s has ONNX data type %d, expected 1 (float)" % (theirs, dtype))
        n = 1
        for d in shape:
            n *= d
        if dims != shape or len(data) != 4 * n:
            sys.exit("vad_convert: %s has shape %s (%d bytes), expected %s"
                     % (theirs, dims, len(data), shape))
        header[ours] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "whisperd-silero-vad", "version": "1"}
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)  # data 8-byte aligned
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
