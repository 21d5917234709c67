// The microphone's samples, mono, at 24 kHz PCM16 (the Realtime API's
// audio/pcm), in 100 ms blocks with their peak level. Each output sample is
// the mean of the input samples since the one before (a box filter against
// aliasing), or the last one repeated where the input rate is lower.
'use strict';
class Pcm16At24k extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / 24000; // input samples per output sample
    this.t = 0; this.sum = 0; this.n = 0; this.last = 0; this.peak = 0;
    this.buf = new Int16Array(2400);
    this.len = 0;
  }
  emit(y) {
    const v = Math.max(-1, Math.min(1, y));
    this.buf[this.len++] = v < 0 ? v * 32768 : v * 32767;
    if (this.len === this.buf.length) {
      this.port.postMessage({ pcm: this.buf.buffer, peak: this.peak }, [this.buf.buffer]);
      this.buf = new Int16Array(2400);
      this.len = 0;
      this.peak = 0;
    }
  }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    for (let i = 0; i < ch.length; i++) {
      const x = ch[i];
      this.sum += x; this.n++;
      const a = Math.abs(x);
      if (a > this.peak) this.peak = a;
      this.t += 1;
      while (this.t >= this.step) {
        this.t -= this.step;
        if (this.n) { this.last = this.sum / this.n; this.sum = 0; this.n = 0; }
        this.emit(this.last);
      }
    }
    return true;
  }
}
registerProcessor('pcm16-24k', Pcm16At24k);
