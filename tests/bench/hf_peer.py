#!/usr/bin/env python3
"""Same-device CUDA peer for whisperd issue #40.

Times Hugging Face transformers' Whisper (large-v3-turbo shapes, random weights,
attn_implementation="sdpa", no downloads, no torch.compile) on the GPU it runs on, so
that the Vulkan engine's encoder / decoder timings on the same H200 have a reference:
  * cuBLAS GEMM ceilings at the encoder's shapes (M=1500; N,K in {1280,3840,5120})
  * encoder, one call on [B,128,3000] mels, B in {1,8}: ms/call, ms/30 s window, TFLOP/s
  * decoder step: one token with a KV cache (4-token prefill + cached cross K/V) and the
    logits projection, B in {1,8}: ms/step averaged over a fixed run of steps
  * decoder prefill of a 224-token prompt at B=1 (cross K/V projection included)
in four modes: fp32 (TF32 off), tf32 (fp32 with TF32 on), fp16, bf16. CUDA events,
warm-up, median and min. Header: versions, GPU, clocks, SDPA backend seen.
Every measurement is guarded (errors/OOM are recorded, the run goes on) and a time
budget skips what is left. `--device cpu --small` runs a tiny config for testing.

GPU: python3 tests/bench/hf_peer.py --json $OUT/hf_peer.json --budget-s 240
CPU: python3 tests/bench/hf_peer.py --device cpu --small
"""
import argparse, json, os, platform, statistics, subprocess, sys, time, warnings

import torch
import transformers
from transformers import WhisperConfig, WhisperForConditionalGeneration

MODES = {"fp32": (torch.float32, False), "tf32": (torch.float32, True),
         "fp16": (torch.float16, False), "bf16": (torch.bfloat16, False)}
MODEL_MODES = ["fp16", "bf16", "fp32", "tf32"]
GEMM_SHAPES = [(1280, 1280), (3840, 1280), (5120, 1280), (1280, 5120)]  # (N, K), M=1500
STEPS, PREFILL, PROMPT = 32, 4, 224

def turbo_config(small):
    kw = dict(d_model=1280, encoder_layers=32, encoder_attention_heads=20, decoder_layers=4,
              decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120,
              num_mel_bins=128, vocab_size=51866, max_source_positions=1500,
              max_target_positions=448)
    if small:
        kw.update(d_model=64, encoder_layers=2, encoder_attention_heads=4, decoder_layers=2,
                  decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                  num_mel_bins=80, vocab_size=512, pad_token_id=0, bos_token_id=1,
                  eos_token_id=1, decoder_start_token_id=2)
    return WhisperConfig(use_cache=True, attn_implementation="sdpa", **kw)

def encoder_flops(c, T=None):
    """Exact matmul FLOPs per 30 s window: conv stem + per layer linears + QK^T and PV."""
    T = T or c.max_source_positions
    d, f = c.d_model, c.encoder_ffn_dim
    conv = 2 * (2 * T) * c.num_mel_bins * d * 3 + 2 * T * d * d * 3
    layer = 2 * T * d * (3 * d + d + 2 * f) + 2 * 2 * T * T * d
    return conv + c.encoder_layers * layer

class Bench:
    def __init__(self, args):
        self.a, self.t0 = args, time.time()
        self.cuda = args.device == "cuda"
        self.dev = torch.device(args.device)
        self.res = {"header": {}, "gemm": [], "runs": [], "notes": []}
        self.model, self.model_dtype = None, None
        self.cfg = turbo_config(args.small)

    def log(self, s):
        print(s, flush=True)

    def sync(self):
        if self.cuda: torch.cuda.synchronize()

    def set_mode(self, mode):
        tf32 = MODES[mode][1]
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        assert torch.backends.cuda.matmul.allow_tf32 == tf32 == torch.backends.cudnn.allow_tf32

    def timed(self, fn, warm, iters, inner=1, prep=None):
        """Returns per-call ms for `iters` timed runs, each `inner` back-to-back calls."""
        for _ in range(warm):
            if prep: prep()
            for _ in range(inner): fn()
        self.sync()
        out = []
        for _ in range(iters):
            if prep: prep()
            if self.cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
            t = time.perf_counter()
            for _ in range(inner): fn()
            if self.cuda:
                e1.record(); e1.synchronize(); out.append(e0.elapsed_time(e1) / inner)
            else:
                out.append((time.perf_counter() - t) * 1e3 / inner)
        return out

    def guarded(self, name, fn, rec_list=None):
        """Runs one measurement; budget skip and errors are recorded, never fatal."""
        rec_list = self.res["runs"] if rec_list is None else rec_list
        if time.time() - self.t0 > self.a.budget_s:
            self.log(f"SKIP {name}: budget {self.a.budget_s:.0f} s spent")
            rec_list.append({"name": name, "skipped": "budget"}); return None
        try:
            rec = fn(); rec["name"] = name; rec_list.append(rec); return rec
        except Exception as e:  # OOM included
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            self.log(f"ERROR {name}: {msg}")
            rec_list.append({"name": name, "error": msg})
            self.drop_model()
            return None

    def header(self):
        h = self.res["header"]
        h.update(torch=torch.__version__, transformers=transformers.__version__,
                 python=platform.python_version(), cuda=torch.version.cuda,
                 cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                 device=self.a.device, small=self.a.small,
                 config={k: getattr(self.cfg, k) for k in ("d_model", "encoder_layers",
                         "decoder_layers", "encoder_attention_heads", "encoder_ffn_dim",
                         "num_mel_bins", "vocab_size")})
        if self.cuda:
            p = torch.cuda.get_device_properties(0)
            h.update(gpu=torch.cuda.get_device_name(0), sm_count=p.multi_processor_count,
                     mem_gib=round(p.total_memory / 2**30, 1), cc=f"{p.major}.{p.minor}")
            h["nvidia_smi"] = self.smi()
            h["sdp_enabled"] = {k: getattr(torch.backends.cuda, k + "_sdp_enabled")()
                                for k in ("flash", "mem_efficient", "cudnn", "math")}
            h["fp16_reduced_precision_reduction"] = \
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        else:
            h["gpu"] = f"none (CPU: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
        try:
            h["sdpa_accepts"] = self.sdpa_accepts()
        except Exception as e:
            h["sdpa_accepts"] = f"probe failed: {type(e).__name__}: {e}"
        for k, v in h.items():
            self.log(f"# {k}: {v}")

    def smi(self):
        """nvidia-smi clocks (tolerates its absence or an unknown field)."""
        for q in ("name,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,"
                  "power.limit,temperature.gpu,driver_version", "clocks.sm,clocks.max.sm,clocks.mem"):
            try:
                r = subprocess.run(["nvidia-smi", "--query-gpu=" + q, "--format=csv"],
                                   capture_output=True, text=True, timeout=20)
                if r.returncode == 0:
                    return r.stdout.strip().replace("\n", " | ")
            except Exception as e:
                return f"unavailable ({type(e).__name__})"
        return f"failed: {(r.stdout + r.stderr).strip()[:200]}"

    def sdpa_accepts(self):
        """Which SDPA backends accept the encoder (1500x1500) and decoder-step (1x1500) shapes."""
        from torch.nn.attention import SDPBackend, sdpa_kernel
        F = torch.nn.functional
        H = self.cfg.encoder_attention_heads; D = self.cfg.d_model // H
        out = {}
        for mode in ("fp16", "bf16", "fp32"):
            dt = MODES[mode][0]; row = {}
            for be in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
                if not hasattr(SDPBackend, be): continue
                ok = []
                for lq in (1500, 1):
                    q = torch.randn(1, H, lq, D, device=self.dev, dtype=dt)
                    k = torch.randn(1, H, 1500, D, device=self.dev, dtype=dt)
                    try:
                        with warnings.catch_warnings(), sdpa_kernel(getattr(SDPBackend, be)):
                            warnings.simplefilter("ignore")
                            F.scaled_dot_product_attention(q, k, k)
                        self.sync(); ok.append("y")
                    except Exception:
                        ok.append("n")
                row[be.split("_")[0].lower()] = "enc:%s step:%s" % tuple(ok)
            out[mode] = row
        return out

    def sdpa_seen(self, fn):
        """Profiles one call; returns the SDPA aten ops and attention-like kernels that ran."""
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with warnings.catch_warnings(), profile(activities=acts) as prof:
            warnings.simplefilter("ignore")
            fn(); self.sync()
        names = {e.key for e in prof.key_averages()}
        ops = sorted(n for n in names if "scaled_dot_product" in n)
        keys = ("flash", "fmha", "attention", "attn", "cudnn", "softmax")
        kern = sorted(n[:120] for n in names if not n.startswith("aten::")
                      and any(k in n.lower() for k in keys))[:8]
        return {"aten_ops": ops, "kernels": kern}

    def gemm(self):
        for mode in ("fp32", "tf32", "fp16", "bf16"):
            for n, k in GEMM_SHAPES:
                self.guarded(f"gemm {mode} M1500 N{n} K{k}", lambda: self.gemm_one(mode, n, k),
                             self.res["gemm"])

    def gemm_one(self, mode, n, k):
        self.set_mode(mode); dt = MODES[mode][0]; m = 1500
        if self.a.small:  # CPU test: shapes / 10
            m, n, k = m // 10, n // 10, k // 10
        g = torch.Generator(device=self.dev).manual_seed(1)
        a = torch.randn(m, k, device=self.dev, dtype=dt, generator=g)
        b = torch.randn(k, n, device=self.dev, dtype=dt, generator=g)
        c = torch.empty(m, n, device=self.dev, dtype=dt)
        inner = 50 if self.cuda else 2
        ms = self.timed(lambda: torch.matmul(a, b, out=c), 2, 7 if self.cuda else 3, inner)
        med = statistics.median(ms)
        tf = 2 * m * n * k / (min(ms) * 1e-3) / 1e12
        self.log(f"gemm  {mode:4s} M={m:4d} N={n:5d} K={k:5d}: median {med*1e3:8.1f} us  "
                 f"min {min(ms)*1e3:8.1f} us  best {tf:7.1f} TFLOP/s (median "
                 f"{2*m*n*k/(med*1e-3)/1e12:.1f})")
        return {"mode": mode, "M": m, "N": n, "K": k, "median_ms": med, "min_ms": min(ms),
                "tflops_best": tf, "tflops_median": 2 * m * n * k / (med * 1e-3) / 1e12}

    def drop_model(self):
        self.model, self.model_dtype = None, None
        if self.cuda: torch.cuda.empty_cache()

    def get_model(self, dt):
        if self.model_dtype == dt:
            return self.model
        self.drop_model()
        torch.manual_seed(0)
        t = time.time()
        with torch.device(self.dev):
            try:
                m = WhisperForConditionalGeneration._from_config(self.cfg, dtype=dt,
                                                                 attn_implementation="sdpa")
            except TypeError:
                m = WhisperForConditionalGeneration(self.cfg).to(dt)
        m = m.to(self.dev, dt).eval()
        self.sync()
        impl = m.config._attn_implementation
        self.log(f"  (built {dt} model in {time.time()-t:.1f} s, attn={impl}, "
                 f"{sum(p.numel() for p in m.parameters())/1e6:.1f} M params)")
        self.model, self.model_dtype = m, dt
        return m

    def encoder(self, mode, B):
        self.set_mode(mode); dt = MODES[mode][0]; m = self.get_model(dt)
        c = self.cfg
        x = torch.randn(B, c.num_mel_bins, 2 * c.max_source_positions, device=self.dev, dtype=dt)
        fn = lambda: m.model.encoder(input_features=x)
        it = (10 if B == 1 else 5) if self.cuda else 2
        ms = self.timed(fn, 3 if self.cuda else 1, it)
        med, fl = statistics.median(ms), encoder_flops(c)
        rec = {"kind": "encoder", "mode": mode, "B": B, "median_ms": med, "min_ms": min(ms),
               "ms_per_window": med / B, "tflops": fl * B / (med * 1e-3) / 1e12,
               "flops_per_window": fl, "iters": len(ms)}
        self.log(f"enc   {mode:4s} B={B}: median {med:8.2f} ms  min {min(ms):8.2f} ms  "
                 f"{med/B:7.2f} ms/window  {rec['tflops']:6.1f} TFLOP/s "
                 f"({fl/1e12:.3f} TFLOP/window)")
        if B == 1:
            try:
                rec["sdpa"] = self.sdpa_seen(fn)
            except Exception as e:
                rec["sdpa"] = f"profiler failed: {type(e).__name__}: {e}"
            self.log(f"      sdpa seen: {rec['sdpa']}")
        return rec

    def dec_inputs(self, B, dt, n):
        c = self.cfg
        g = torch.Generator(device=self.dev).manual_seed(2)
        enc = torch.randn(B, c.max_source_positions, c.d_model, device=self.dev, dtype=dt,
                          generator=g)
        ids = torch.randint(0, c.vocab_size, (B, n), device=self.dev, generator=g)
        return enc, ids

    def dec_step(self, mode, B):
        self.set_mode(mode); dt = MODES[mode][0]; m = self.get_model(dt)
        enc, ids = self.dec_inputs(B, dt, PREFILL)
        dec, head = m.model.decoder, m.proj_out
        out = dec(input_ids=ids, encoder_hidden_states=enc, use_cache=True)
        cache = out.past_key_values  # EncoderDecoderCache: self-attn grows, cross K/V cached
        tok = head(out.last_hidden_state[:, -1:]).argmax(-1)
        steps = STEPS if self.cuda else 4

        def prep():  # untimed: roll the self-attention cache back to the prefill
            extra = cache.get_seq_length() - PREFILL
            if extra > 0: cache.crop(-extra)  # negative = tokens to remove (5.x API)

        def run():
            t = tok
            for _ in range(steps):
                o = dec(input_ids=t, encoder_hidden_states=enc, past_key_values=cache,
                        use_cache=True)
                t = head(o.last_hidden_state).argmax(-1)  # greedy, stays on device
        ms = [x / steps for x in self.timed(run, 1, 5 if self.cuda else 2, prep=prep)]
        prep()
        assert cache.get_seq_length() == PREFILL, cache.get_seq_length()
        med = statistics.median(ms)
        self.log(f"step  {mode:4s} B={B}: median {med:8.3f} ms/step  min {min(ms):8.3f}  "
                 f"({steps} steps from ctx {PREFILL}, logits incl.)")
        return {"kind": "decoder_step", "mode": mode, "B": B, "median_ms": med,
                "min_ms": min(ms), "steps": steps, "prefill": PREFILL}

    def prefill(self, mode, B=1):
        self.set_mode(mode); dt = MODES[mode][0]; m = self.get_model(dt)
        n = min(PROMPT, self.cfg.max_target_positions)
        enc, ids = self.dec_inputs(B, dt, n)
        dec, head = m.model.decoder, m.proj_out
        fn = lambda: head(dec(input_ids=ids, encoder_hidden_states=enc,
                              use_cache=True).last_hidden_state[:, -1:])
        ms = self.timed(fn, 2, 7 if self.cuda else 2)
        med = statistics.median(ms)
        self.log(f"pref  {mode:4s} B={B}: median {med:8.2f} ms  min {min(ms):8.2f} ms  "
                 f"({n} tokens, fresh cache, cross K/V + last-token logits incl.)")
        return {"kind": "prefill", "mode": mode, "B": B, "tokens": n, "median_ms": med,
                "min_ms": min(ms)}

    def run(self):
        self.header()
        self.log("## cuBLAS GEMM ceilings (best = from min time; 50 back-to-back per event pair)")
        self.gemm()
        self.log("## model (HF WhisperForConditionalGeneration, random init, sdpa, eval, inference_mode)")
        modes = [m for m in MODEL_MODES if m in self.a.modes]
        plan = []
        for phase, B in (("encoder", 1), ("dec_step", 1), ("encoder", 8), ("dec_step", 8),
                         ("prefill", 1)):
            plan += [(phase, md, B) for md in modes]
            modes = modes[::-1]  # snake order: reuse the model built last
        for phase, md, B in plan:
            if B in self.a.batches or phase == "prefill":
                fn = getattr(self, phase)
                self.guarded(f"{phase} {md} B={B}", lambda: fn(md, B))
        self.drop_model()
        if self.cuda:
            self.res["header"]["nvidia_smi_end"] = self.smi()
            self.log(f"# nvidia_smi_end: {self.res['header']['nvidia_smi_end']}")
        self.res["notes"].append(
            f"encoder TFLOP/s from {encoder_flops(self.cfg)/1e12:.4f} TFLOP/window: conv stem + "
            "per layer 2*T*d*(4d+2f) linears + 4*T*T*d attention, T=1500")
        self.res["elapsed_s"] = time.time() - self.t0
        self.log(f"# done in {self.res['elapsed_s']:.1f} s (budget {self.a.budget_s:.0f} s)")

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true", help="tiny config (for CPU tests)")
    ap.add_argument("--json", help="write all figures as JSON here")
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--modes", default="fp16,bf16,fp32,tf32")
    ap.add_argument("--batches", default="1,8")
    a = ap.parse_args()
    a.modes = a.modes.split(","); a.batches = [int(b) for b in a.batches.split(",")]
    if a.device == "cuda" and not torch.cuda.is_available():
        print("# CUDA not available: falling back to --device cpu --small"); a.device, a.small = "cpu", True
    torch.manual_seed(0)
    b = Bench(a)
    try:
        with torch.inference_mode():
            b.run()
    except BaseException as e:  # keep whatever was measured
        b.res["fatal"] = f"{type(e).__name__}: {e}"
        print(f"FATAL {b.res['fatal']}", flush=True)
    finally:
        if a.json:
            os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
            with open(a.json, "w") as f:
                json.dump(b.res, f, indent=1, default=str)
            print(f"# wrote {a.json}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
