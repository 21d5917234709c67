#!/usr/bin/env python3
"""scripts/diar_convert.py on checkpoints made here in PyTorch's zip layout
(no torch needed: stand-in modules named torch and torch._utils make the
pickle name the same functions a real checkpoint names): values and shapes
through, a strided (transposed) tensor gathered, the batch-norm counters of
an embedding left out, a wrong kind of checkpoint, a non-float tensor, a
file that is not a zip and a pickle that names os.system each refused or
made inert, never run. Exit 0 on success; prints what failed otherwise.

usage: test_diar_convert.py SCRIPTS_DIR"""
import array
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import types
import zipfile

# Stand-ins, so that pickle writes the global names a torch checkpoint has.
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"], sys.modules["torch._utils"] = torch, torch_utils


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called while pickling")


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
for name in ("FloatStorage", "LongStorage"):
    setattr(torch, name, type(name, (), {"__module__": "torch"}))


class T:
    """A tensor to pickle: storage key, element type, offset, size, stride."""

    def __init__(self, key, kind, offset, size, stride):
        self.key, self.kind = key, kind
        self.offset, self.size, self.stride = offset, size, stride

    def __reduce__(self):
        storage = ("storage", getattr(torch, self.kind), self.key, "cpu", 0)
        return (_rebuild_tensor_v2, (Persistent(storage), self.offset, self.size, self.stride,
                                     False, {}))


class Persistent:
    def __init__(self, pid):
        self.pid = pid


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Persistent) else None


def checkpoint(path, obj, storages):
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in storages.items():
            z.writestr(f"archive/data/{key}", data)


def f32(values):
    return array.array("f", values).tobytes()


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for name, t in h.items():
        if name == "__metadata__":
            continue
        a = array.array("f")
        a.frombytes(b[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]])
        out[name] = (t["shape"], list(a))
    return h["__metadata__"], out


def run(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def main():
    script = os.path.join(sys.argv[1], "diar_convert.py")
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        # segmentation: classifier 2x3 stored transposed (stride (1, 2)),
        # LSTM layer 0 both ways, at an offset into a shared storage
        seg = os.path.join(d, "seg.bin")
        sd = {
            "classifier.weight": T("0", "FloatStorage", 0, (2, 3), (1, 2)),
            "classifier.bias": T("1", "FloatStorage", 1, (2,), (1,)),
            "lstm.weight_ih_l0": T("2", "FloatStorage", 0, (4, 1), (1, 1)),
            "lstm.weight_hh_l0": T("2", "FloatStorage", 4, (4, 1), (1, 1)),
            "lstm.weight_ih_l0_reverse": T("2", "FloatStorage", 8, (4, 1), (1, 1)),
        }
        checkpoint(seg, {"state_dict": sd, "hyper_parameters": {"sample_rate": 16000}},
                   {"0": f32([1, 2, 3, 4, 5, 6]), "1": f32([9, 7, 8]),
                    "2": f32(range(12))})
        out = os.path.join(d, "seg.safetensors")
        p = run(script, "segmentation", seg, out)
        check(p.returncode == 0, f"segmentation refused: {p.stderr}")
        if p.returncode == 0:
            meta, t = read_safetensors(out)
            check(meta["format"] == "whisperd-diarization" and meta["classes"] == "2" and
                  meta["lstm_layers"] == "1" and meta["bidirectional"] == "1", meta)
            # stored [[1,3,5],[2,4,6]] by stride (1, 2): rows gathered
            check(t["classifier.weight"] == ([2, 3], [1, 3, 5, 2, 4, 6]), t["classifier.weight"])
            check(t["classifier.bias"] == ([2], [7, 8]), t["classifier.bias"])
            check(t["lstm.weight_hh_l0"][1] == [4, 5, 6, 7], t["lstm.weight_hh_l0"])
        # the same file as an embedding: the wrong kind, refused
        p = run(script, "embedding", seg, out)
        check(p.returncode != 0 and "not a CAM++" in p.stderr, p.stderr)

        # embedding: a counter (LongStorage) left out, the rest through
        emb = os.path.join(d, "emb.pt")
        checkpoint(emb, {"head.conv1.weight": T("0", "FloatStorage", 0, (2, 1), (1, 1)),
                         "head.bn1.num_batches_tracked": T("1", "LongStorage", 0, (), ()),
                         "xvector.dense.linear.weight": T("0", "FloatStorage", 0, (2, 1),
                                                          (1, 1))},
                   {"0": f32([0.5, -0.25]), "1": struct.pack("<q", 7)})
        p = run(script, "embedding", emb, out)
        check(p.returncode == 0, f"embedding refused: {p.stderr}")
        if p.returncode == 0:
            meta, t = read_safetensors(out)
            check(sorted(t) == ["head.conv1.weight", "xvector.dense.linear.weight"], sorted(t))
            check(meta["embedding_dim"] == "2", meta)

        # a float tensor backed by a LongStorage: refused
        bad = os.path.join(d, "bad.pt")
        checkpoint(bad, {"head.x": T("0", "LongStorage", 0, (1,), (1,))},
                   {"0": struct.pack("<q", 1)})
        p = run(script, "embedding", bad, out)
        check(p.returncode != 0 and "not FloatStorage" in p.stderr, p.stderr)

        # not a zip
        p = run(script, "segmentation", script, out)
        check(p.returncode != 0 and "not a zip" in p.stderr.lower(), p.stderr)

        # a pickle naming os.system: an inert stub, nothing run
        marker = os.path.join(d, "ran")
        evil = os.path.join(d, "evil.pt")
        payload = (b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len("touch " + marker)) +
                   ("touch " + marker).encode() + b"q\x01\x85q\x02Rq\x03.")
        with zipfile.ZipFile(evil, "w") as z:
            z.writestr("archive/data.pkl", payload)
        p = run(script, "embedding", evil, out)
        check(p.returncode != 0, "a pickle of os.system was accepted")
        check(not os.path.exists(marker), "the checkpoint's pickle ran a command")

    for f in failures:
        print("FAIL:", f)
    print(f"test_diar_convert: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
