#!/usr/bin/env python3
"""Converts the two diarization models of issue #41 from their PyTorch
checkpoints into the files whisperd loads: every float tensor, f32 and
contiguous, in the safetensors layout (an 8-byte little-endian header
length, a JSON header naming each tensor's dtype, shape and byte range,
then the data), under the checkpoint's own names, with __metadata__
{"format": "whisperd-diarization", "version": "1", "model": KIND, ...}.

usage: diar_convert.py segmentation|embedding CHECKPOINT OUT

  segmentation  pyannote's segmentation-3.0 (pytorch_model.bin, a
                PyTorch Lightning checkpoint: its "state_dict", 54 tensors:
                SincNet, 4 bidirectional LSTM layers of 128, two linear
                layers, 7 powerset classes); the model's shape goes into
                the metadata.
  embedding     3D-Speaker's CAM++ zh_en common (campplus_cn_en_common.pt,
                a bare state_dict; batch-norm counters, which inference
                never reads, are left out).

Standard library only. A checkpoint is a zip archive: archive/data.pkl
pickles the dict, each tensor as torch._utils._rebuild_tensor_v2(storage,
offset, size, stride, ...) whose storage is a persistent id ("storage",
torch.FloatStorage, key, location, numel) naming archive/data/<key>, the
raw little-endian elements. The unpickler below builds nothing else: any
other class the pickle names becomes an inert stub, so the file cannot run
code here, and a tensor whose storage is not float is refused unless it is
a counter to drop.
"""
import array
import io
import json
import pickle
import struct
import sys
import zipfile


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.key, self.dtype = storage[2], storage[1]
        self.offset, self.size, self.stride = offset, tuple(size), tuple(stride)


class Stub:
    """Whatever class a checkpoint's pickle names besides tensors."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class ODict(dict):
    """collections.OrderedDict as a plain dict (state_dicts carry an
    attribute, _metadata, that BUILD sets on it)."""


def _rebuild_tensor(storage, offset, size, stride, *rest):
    return Tensor(storage, offset, size, stride)


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return ODict
        if module == "torch" and name.endswith("Storage"):
            return name  # the storage's element type, by name
        return type(f"{module}.{name}", (Stub,), {})

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise ValueError(f"unknown persistent id {pid!r}")
        return pid


def load_checkpoint(path):
    """(dict of the pickled object, function reading a storage's bytes)."""
    z = zipfile.ZipFile(path)
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
    if len(pkl) != 1:
        raise ValueError(f"{path}: not a PyTorch zip checkpoint (no single */data.pkl)")
    root = pkl[0][: -len("data.pkl")]
    obj = Unpickler(io.BytesIO(z.read(pkl[0]))).load()
    return obj, lambda key: z.read(f"{root}data/{key}")


def contiguous_f32(t, raw):
    """t's elements as a C-contiguous array('f'), from its storage bytes."""
    if t.dtype != "FloatStorage":
        raise ValueError(f"storage of type {t.dtype}, not FloatStorage")
    store = array.array("f")
    store.frombytes(raw)
    if sys.byteorder != "little":
        store.byteswap()
    n = 1
    for d in t.size:
        n *= d
    want, s = [], 1
    for d in reversed(t.size):
        want.insert(0, s)
        s *= d
    if all(d == 1 or st == w for d, st, w in zip(t.size, t.stride, want)):
        if t.offset + n > len(store):
            raise ValueError("tensor past its storage")
        return store[t.offset:t.offset + n]
    out = array.array("f", bytes(4 * n))  # a strided view: gathered
    for i in range(n):
        j, r = t.offset, i
        for d, st in zip(reversed(t.size), reversed(t.stride)):
            j += (r % d) * st
            r //= d
        out[i] = store[j]
    return out


def segmentation(obj):
    sd = obj.get("state_dict") if isinstance(obj, dict) else None
    if not isinstance(sd, dict) or "classifier.weight" not in sd:
        raise ValueError("not a pyannote segmentation checkpoint (no state_dict.classifier)")
    hp = obj.get("hyper_parameters", {})
    lstm = hp.get("lstm", {}) if isinstance(hp.get("lstm"), dict) else {}
    n_layers = sum(1 for k in sd if k.startswith("lstm.weight_ih_l") and "reverse" not in k)
    meta = {
        "model": "pyannote-segmentation-3.0",
        "sample_rate": str(hp.get("sample_rate", 16000)),
        "lstm_layers": str(n_layers),
        "lstm_hidden": str(sd["lstm.weight_hh_l0"].size[1]),
        "classes": str(sd["classifier.weight"].size[0]),
        "max_speakers_per_chunk": "3",
        "max_speakers_per_frame": "2",
        "window_s": "10",
        "bidirectional": "1" if "lstm.weight_ih_l0_reverse" in sd else "0",
    }
    if lstm.get("hidden_size") not in (None, int(meta["lstm_hidden"])):
        raise ValueError("LSTM hidden size differs between hyper-parameters and weights")
    return sd, meta


def embedding(obj):
    if not isinstance(obj, dict) or "xvector.dense.linear.weight" not in obj and not any(
            k.startswith("head.") for k in obj):
        raise ValueError("not a CAM++ state_dict (no head.* / xvector.* tensors)")
    sd = {k: v for k, v in obj.items()
          if isinstance(v, Tensor) and not k.endswith("num_batches_tracked")}
    dims = [v.size[0] for k, v in sd.items() if k.endswith("dense.linear.weight")]
    meta = {"model": "campplus-zh-en-common", "sample_rate": "16000", "fbank_bins": "80",
            "embedding_dim": str(dims[-1] if dims else 192)}
    return sd, meta


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("segmentation", "embedding"):
        sys.exit(__doc__.split("\n\n")[1])
    kind, src, out = sys.argv[1:]
    try:
        obj, read = load_checkpoint(src)
        sd, meta = segmentation(obj) if kind == "segmentation" else embedding(obj)
        header, blobs, off = {}, [], 0
        for name in sorted(sd):
            t = sd[name]
            if not isinstance(t, Tensor):
                raise ValueError(f"{name}: not a tensor")
            data = contiguous_f32(t, read(t.key)).tobytes()
            header[name] = {"dtype": "F32", "shape": list(t.size),
                            "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
    except (ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile,
            pickle.UnpicklingError, EOFError) as e:
        sys.exit(f"diar_convert: {src}: {e}")
    header["__metadata__"] = {"format": "whisperd-diarization", "version": "1", **meta}
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-aligned
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    print(f"diar_convert: {out}: {len(sd)} tensors, {off} bytes of f32 ({meta['model']})")


if __name__ == "__main__":
    main()
