// whisperd's page: uploads, the microphone (Realtime API) and status, with
// nothing but this daemon's own API. No framework, no build step.
'use strict';
(() => {
const $ = (id) => document.getElementById(id);
const KEY_ITEM = 'whisperd.apiKey';
let apiKey = localStorage.getItem(KEY_ITEM) || '';
let lastResult = null; // {file, opts, json text, parsed}

// ---- API helpers ----------------------------------------------------------
function authHeaders() { return apiKey ? { Authorization: 'Bearer ' + apiKey } : {}; }

// The message of an API error body, as the daemon gave it.
function errorText(status, body, retryAfter) {
  let msg = '';
  try { msg = JSON.parse(body).error.message || ''; } catch (e) { msg = body || ''; }
  let text = 'HTTP ' + status + (msg ? ': ' + msg : '');
  if (status === 429 && retryAfter) text += ' (retry after ' + retryAfter + ' s)';
  if (status === 413) text += ' (the file is larger than the daemon accepts)';
  return text;
}

// Shows the key form with the 401's message; what is being typed stays.
function askKey(message) {
  $('key-msg').textContent = message;
  if (!$('key-box').hidden) return;
  $('key-box').hidden = false;
  $('key').value = apiKey;
  $('key').focus();
}

// GET a JSON API route; a 401 asks for the key.
async function getJSON(path) {
  const r = await fetch(path, { headers: authHeaders(), cache: 'no-store' });
  const body = await r.text();
  if (r.status === 401) askKey(errorText(401, body));
  if (!r.ok) throw new Error(errorText(r.status, body, r.headers.get('Retry-After')));
  return JSON.parse(body);
}

// POST the form with upload progress; resolves {status, body, retryAfter}.
// onText: called with the response text so far as it arrives (a stream).
function post(path, form, onUpload, type, onText) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('POST', path);
    if (apiKey) x.setRequestHeader('Authorization', 'Bearer ' + apiKey);
    if (type) x.responseType = type;
    if (onUpload) x.upload.onprogress = (e) => { if (e.lengthComputable) onUpload(e.loaded / e.total); };
    if (onText) x.onprogress = () => { if (x.status === 200) onText(x.responseText); };
    x.onload = () => resolve({ status: x.status, body: x.response, retryAfter: x.getResponseHeader('Retry-After') });
    x.onerror = () => reject(new Error('The connection to the daemon failed.'));
    x.send(form);
  });
}

// Reads the SSE events of a growing text: feed(text) calls onEvent with
// each complete event's JSON once; [DONE] and comments are skipped.
function sseReader(onEvent) {
  let used = 0;
  return (text) => {
    for (;;) {
      const end = text.indexOf('\n\n', used);
      if (end < 0) return;
      const block = text.slice(used, end);
      used = end + 2;
      const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
      if (data && data !== '[DONE]') onEvent(JSON.parse(data));
    }
  };
}

function fmtTime(s, sep) {
  const ms = Math.round(s * 1000), h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60;
  const sec = Math.floor(ms / 1000) % 60, frac = ms % 1000;
  const p = (n, w) => String(n).padStart(w, '0');
  return (h ? h + ':' + p(m, 2) : String(m)) + ':' + p(sec, 2) + (sep || '.') + p(Math.floor(frac / 10), 2);
}

// ---- tabs -----------------------------------------------------------------
const tabs = ['files', 'live', 'status'];
function selectTab(name, focus) {
  for (const t of tabs) {
    const b = $('tab-' + t), on = t === name;
    b.setAttribute('aria-selected', String(on));
    b.tabIndex = on ? 0 : -1;
    $(t).hidden = !on;
    if (on && focus) b.focus();
  }
  if (name === 'status') refreshStatus();
}
for (const t of tabs) {
  $('tab-' + t).addEventListener('click', () => selectTab(t));
  $('tab-' + t).addEventListener('keydown', (e) => {
    const i = tabs.indexOf(t);
    if (e.key === 'ArrowRight') selectTab(tabs[(i + 1) % tabs.length], true);
    else if (e.key === 'ArrowLeft') selectTab(tabs[(i + tabs.length - 1) % tabs.length], true);
  });
}

$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  apiKey = $('key').value.trim();
  localStorage.setItem(KEY_ITEM, apiKey);
  $('key-box').hidden = true;
  loadModels();
  refreshStatus();
});

// ---- models and status ----------------------------------------------------
let models = [];
async function loadModels() {
  try {
    models = (await getJSON('/v1/models')).data || [];
  } catch (e) {
    $('status-line').textContent = e.message;
    return;
  }
  const sel = $('model'), keep = sel.value;
  sel.textContent = '';
  for (const m of models) {
    const o = document.createElement('option');
    o.value = m.id;
    o.textContent = m.id + ('loaded' in m ? (m.loaded ? ' (loaded)' : ' (not loaded)') : '');
    sel.append(o);
  }
  if (keep && models.some((m) => m.id === keep)) sel.value = keep;
  updateGo();
}

function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^whisperd_([a-z_]+)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

async function refreshStatus() {
  if (document.visibilityState !== 'visible') return;
  let metrics = [];
  try {
    const r = await fetch('/metrics', { cache: 'no-store' });
    if (r.ok) metrics = parseMetrics(await r.text());
  } catch (e) { /* shown below */ }
  const g = (n) => { const x = metrics.find((m) => m.name === n && !Object.keys(m.labels).length); return x ? x.value : null; };
  const devices = [...new Set(metrics.filter((m) => m.name === 'worker_queued' && m.labels.device).map((m) => m.labels.device))];
  const rows = [
    ['Devices', devices.join(', ') || '–'],
    ['Ready', g('ready') === 1 ? 'yes' : g('ready') === null ? '–' : 'no'],
    ['Queue', g('queue_depth') === null ? '–' : g('queue_depth') + ' waiting of ' + g('queue_capacity')],
    ['Running', g('jobs_running') === null ? '–' : String(g('jobs_running'))],
    ['Batch', g('batch_max_rows') === null ? '–' : (g('batch_rows_mean') || 0).toFixed(2) + ' rows a step on average, ' + g('batch_max_rows') + ' at most'],
    ['Realtime', g('realtime_sessions_open') === null ? '–' : g('realtime_sessions_open') + ' session(s) open'],
  ];
  const dl = $('stats');
  dl.textContent = '';
  for (const [k, v] of rows) {
    const dt = document.createElement('dt'), dd = document.createElement('dd');
    dt.textContent = k; dd.textContent = v;
    dl.append(dt, dd);
  }
  if ($('status').hidden === false || !models.length) await loadModels();
  const ul = $('models');
  ul.textContent = '';
  for (const m of models) {
    const li = document.createElement('li');
    li.textContent = m.id + ('loaded' in m ? (m.loaded ? ' — loaded' : ' — not loaded (loads on first use)') : '');
    ul.append(li);
  }
  if (metrics.length)
    $('status-line').textContent = (devices.join(', ') || 'no device yet') + ' · queue ' + g('queue_depth') +
      ' · running ' + g('jobs_running') + (g('ready') === 1 ? '' : ' · not ready');
}
setInterval(refreshStatus, 5000);
document.addEventListener('visibilitychange', refreshStatus);

// ---- files ----------------------------------------------------------------
let file = null;
function updateGo() { $('go').disabled = !file || !$('model').value; }
$('task').addEventListener('change', () => {
  const tr = $('task').value === 'translations';
  $('language').disabled = tr;
  $('words').disabled = tr;
  $('go').textContent = tr ? 'Translate' : 'Transcribe';
});

function setFile(f) {
  file = f;
  $('drop-text').textContent = f ? f.name + ' (' + (f.size < 10240 ? f.size + ' bytes' : Math.round(f.size / 1024) + ' KiB') + ')' : 'Choose or drop an audio file';
  const a = $('audio');
  if (a.src) URL.revokeObjectURL(a.src);
  a.hidden = !f;
  if (f) a.src = URL.createObjectURL(f);
  $('result').hidden = true;
  updateGo();
}
$('file').addEventListener('change', () => setFile($('file').files[0] || null));
const drop = $('drop');
drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  if (e.dataTransfer.files.length) setFile(e.dataTransfer.files[0]);
});

function requestForm(opts, format) {
  const f = new FormData();
  f.append('file', opts.file, opts.file.name);
  f.append('model', opts.model);
  if (format === 'stream') f.append('stream', 'true');
  else f.append('response_format', format);
  if (opts.task === 'transcriptions') {
    if (opts.language && opts.language !== 'auto') f.append('language', opts.language);
    if (format === 'verbose_json' || format === 'stream') f.append('timestamp_granularities[]', 'segment');
    if (format === 'verbose_json' && opts.words) f.append('timestamp_granularities[]', 'word');
  }
  return f;
}

function showFileError(text) {
  $('file-error').textContent = text;
  $('file-error').hidden = !text;
}

// The progress bar and its words; frac null: an indeterminate bar.
function setProgress(frac, text) {
  $('progress-text').textContent = text;
  if (frac === null) $('progress').removeAttribute('value');
  else $('progress').value = frac;
}

// The audio's length from the player's metadata, or null.
function audioDuration() {
  const d = $('audio').duration;
  return isFinite(d) && d > 0 ? d : null;
}

// Transcriptions stream (stream=true with timestamp_granularities[]=segment:
// each segment's start, end and text as it is decoded), and the bar follows
// the last segment's end over the audio's duration. Word timestamps and
// translations, which have no stream, ask for verbose_json and show the
// upload, then the decoding's seconds.
$('file-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  if (!file) return;
  const opts = { file, model: $('model').value, task: $('task').value,
                 language: $('language').value.trim(), words: $('words').checked };
  const streamed = opts.task === 'transcriptions' && !opts.words;
  showFileError('');
  $('result').hidden = true;
  $('go').disabled = true;
  $('progress-box').hidden = false;
  setProgress(0, 'Uploading…');
  const t0 = performance.now();
  let tick = 0, t1 = 0, shown = null;
  const waiting = () => 'Transcribing… ' + Math.round((performance.now() - t1) / 1000) + ' s';
  const segs = [];
  let doneText = null;
  const onEvent = (ev) => {
    if (ev.error) throw new Error(ev.error.message || 'The transcription failed.');
    if (ev.type === 'transcript.text.segment') {
      segs.push({ id: segs.length, start: ev.start, end: ev.end, text: ev.text });
      if (!shown) shown = startResult();
      shown.add(segs[segs.length - 1], []);
      shown.meta(segs.length + ' segment(s) so far');
      const d = audioDuration();
      if (d) {
        clearInterval(tick);
        tick = 0;
        const f = Math.min(1, ev.end / d);
        setProgress(f, 'Transcribing… ' + Math.round(f * 100) + ' %');
      }
    } else if (ev.type === 'transcript.text.done') doneText = ev.text;
  };
  const feed = streamed ? sseReader(onEvent) : null;
  let streamError = null;
  try {
    const r = await post('/v1/audio/' + opts.task, requestForm(opts, streamed ? 'stream' : 'verbose_json'), (p) => {
      if (p < 1) { setProgress(p, 'Uploading… ' + Math.round(p * 100) + ' %'); return; }
      if (t1) return;
      t1 = performance.now();
      setProgress(streamed && audioDuration() ? 0 : null, waiting()); // until a segment tells more
      tick = setInterval(() => { $('progress-text').textContent = waiting(); }, 1000);
    }, null, feed ? (text) => { try { feed(text); } catch (err) { streamError = streamError || err; } } : null);
    if (r.status === 401) askKey(errorText(401, r.body));
    if (r.status !== 200) throw new Error(errorText(r.status, r.body, r.retryAfter));
    let j;
    if (streamed) {
      feed(r.body); // what the last progress event had not seen
      if (streamError) throw streamError;
      if (doneText === null) throw new Error('The transcription stream ended early.');
      // verbose_json's shape, as far as the stream tells it (the json
      // download asks the API for the whole document)
      j = { task: 'transcribe', duration: audioDuration() || (segs.length ? segs[segs.length - 1].end : 0),
            text: doneText, segments: segs };
      lastResult = { opts, text: null, json: j };
    } else {
      j = JSON.parse(r.body);
      lastResult = { opts, text: r.body, json: j };
    }
    renderResult(j, (performance.now() - t0) / 1000);
    setProgress(1, 'Done');
  } catch (err) {
    showFileError(err.message);
    $('progress-box').hidden = true;
  } finally {
    clearInterval(tick);
    updateGo();
  }
});

// A result list being filled: add(segment, its words), meta(text).
function startResult() {
  const ol = $('segments');
  ol.textContent = '';
  $('result').hidden = false;
  return {
    add: (s, words) => ol.append(segmentItem(s, words)),
    meta: (text) => { $('result-meta').textContent = text; },
  };
}

function segmentItem(s, words) {
  const li = document.createElement('li'), b = document.createElement('button');
  b.type = 'button';
  b.className = 'seg';
  b.dataset.start = s.start;
  b.dataset.end = s.end;
  const t = document.createElement('span');
  t.className = 't';
  t.textContent = fmtTime(s.start) + ' – ' + fmtTime(s.end);
  const x = document.createElement('span');
  x.className = 'x';
  if (words.length) {
    for (const w of words) {
      const span = document.createElement('span');
      span.className = 'w';
      span.title = fmtTime(w.start) + ' – ' + fmtTime(w.end);
      span.dataset.start = w.start;
      span.textContent = w.word.trim();
      x.append(span, ' ');
    }
  } else x.textContent = s.text.trim();
  b.append(t, x);
  b.setAttribute('aria-label', fmtTime(s.start) + ' to ' + fmtTime(s.end) + ': ' + s.text.trim() + ' (play from here)');
  b.addEventListener('click', (e) => { // from the segment's start, or the word's clicked
    const a = $('audio');
    a.currentTime = e.target.dataset && e.target.dataset.start ? Number(e.target.dataset.start) : s.start;
    a.play().catch(() => {});
  });
  li.append(b);
  return li;
}

function renderResult(j, secs) {
  const r = startResult();
  const segs = j.segments || [{ start: 0, end: j.duration || 0, text: j.text }];
  for (const s of segs)
    r.add(s, (j.words || []).filter((w) => w.start >= s.start && w.end <= s.end + 0.01));
  r.meta((j.language ? 'Language ' + j.language + ' · ' : '') +
    (j.duration ? fmtTime(j.duration) + ' of audio · ' : '') + segs.length + ' segment(s) in ' + secs.toFixed(1) + ' s');
}

$('audio').addEventListener('timeupdate', () => {
  const t = $('audio').currentTime;
  for (const b of document.querySelectorAll('#segments .seg')) {
    const on = t >= Number(b.dataset.start) && t < Number(b.dataset.end);
    if (on) b.setAttribute('aria-current', 'true'); else b.removeAttribute('aria-current');
  }
});

function saveBlob(blob, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

for (const b of document.querySelectorAll('.dl')) {
  b.addEventListener('click', async () => {
    if (!lastResult) return;
    const fmt = b.dataset.fmt, base = lastResult.opts.file.name.replace(/\.[^.]*$/, '') || 'transcript';
    const ext = fmt === 'text' ? 'txt' : fmt;
    if (fmt === 'json' && lastResult.text) { saveBlob(new Blob([lastResult.text], { type: 'application/json' }), base + '.json'); return; }
    b.disabled = true;
    showFileError('');
    try { // the API's own rendering of the same request (json: verbose_json's)
      const api = fmt === 'json' ? 'verbose_json' : fmt;
      const r = await post('/v1/audio/' + lastResult.opts.task, requestForm(lastResult.opts, api), null);
      if (r.status !== 200) throw new Error(errorText(r.status, r.body, r.retryAfter));
      if (fmt === 'json') lastResult.text = r.body;
      saveBlob(new Blob([r.body], { type: fmt === 'json' ? 'application/json' : 'text/plain' }), base + '.' + ext);
    } catch (err) {
      showFileError(err.message);
    } finally {
      b.disabled = false;
    }
  });
}

// ---- live: the microphone through /v1/realtime ------------------------------
let live = null; // {ws, ctx, stream, node, closing}
const turnsByItem = new Map();

function liveState(text) { $('live-state').textContent = text; }
function liveError(text) { $('live-error').textContent = text; $('live-error').hidden = !text; }

function b64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function turnItem(id) {
  let t = turnsByItem.get(id);
  if (!t) { t = { text: '' }; turnsByItem.set(id, t); }
  return t;
}

function onEvent(ev) {
  switch (ev.type) {
  case 'input_audio_buffer.speech_started': liveState('Hearing speech…'); break;
  case 'input_audio_buffer.speech_stopped': liveState('Transcribing the turn…'); break;
  case 'conversation.item.input_audio_transcription.delta': {
    const t = turnItem(ev.item_id);
    t.text += ev.delta;
    $('partial').textContent = t.text;
    break;
  }
  case 'conversation.item.input_audio_transcription.partial':
    $('partial').textContent = ev.transcript;
    break;
  case 'conversation.item.input_audio_transcription.completed': {
    turnsByItem.delete(ev.item_id);
    $('partial').textContent = '';
    const li = document.createElement('li'), time = document.createElement('span');
    time.className = 't';
    time.textContent = new Date().toLocaleTimeString() +
      (ev.usage && ev.usage.seconds ? ' · ' + ev.usage.seconds.toFixed(1) + ' s' : '') + '  ';
    const x = document.createElement('span');
    x.className = 'x';
    x.textContent = ev.transcript.trim();
    li.append(time, x);
    $('turns').append(li);
    li.scrollIntoView({ block: 'nearest' });
    liveState(live ? 'Listening…' : '');
    if (live && live.closing) stopLive();
    break;
  }
  case 'conversation.item.input_audio_transcription.failed':
    liveError('A turn failed: ' + ((ev.error && ev.error.message) || 'unknown error'));
    break;
  case 'error':
    liveError((ev.error && ev.error.message) || 'error');
    break;
  }
}

async function startLive() {
  liveError('');
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const protocols = ['realtime'];
  if (apiKey) protocols.push('openai-insecure-api-key.' + apiKey);
  const l = live = { closing: false, speech: false };
  $('mic').setAttribute('aria-pressed', 'true');
  $('mic').textContent = '■ Stop microphone';
  try {
    if (!navigator.mediaDevices || !window.AudioWorkletNode)
      throw new Error('this browser gives no microphone here: it needs https:// or localhost (a secure context)');
    l.stream = await navigator.mediaDevices.getUserMedia({ audio: {
      channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
    // At 24 kHz the browser resamples the microphone itself (Chromium's
    // resampler); where a context cannot take a stream of another rate
    // (Firefox), at the device's rate, and the worklet resamples.
    l.ctx = new AudioContext({ sampleRate: 24000 });
    try {
      l.src = l.ctx.createMediaStreamSource(l.stream);
    } catch (e) {
      l.ctx.close();
      l.ctx = new AudioContext();
      l.src = l.ctx.createMediaStreamSource(l.stream);
    }
    await l.ctx.audioWorklet.addModule('/worklet.js');
  } catch (e) {
    liveError('Microphone: ' + e.message);
    stopLive(true);
    return;
  }
  if (live !== l) { // stopped while the browser asked for the microphone
    for (const t of l.stream.getTracks()) t.stop();
    l.ctx.close().catch(() => {});
    return;
  }
  const ws = l.ws = new WebSocket(proto + '//' + location.host + '/v1/realtime?intent=transcription', protocols);
  let opened = false;
  ws.onopen = () => {
    opened = true;
    const input = { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: { type: 'server_vad' },
                    transcription: { model: $('model').value || 'whisper-1' } };
    const lang = $('language').value.trim();
    if (lang && lang !== 'auto') input.transcription.language = lang;
    ws.send(JSON.stringify({ type: 'session.update', session: { type: 'transcription', audio: { input } } }));
    l.node = new AudioWorkletNode(l.ctx, 'pcm16-24k');
    const mute = l.ctx.createGain();
    mute.gain.value = 0;
    l.src.connect(l.node).connect(mute).connect(l.ctx.destination);
    l.node.port.onmessage = (m) => {
      $('level').value = Math.min(1, m.data.peak);
      if (ws.readyState === WebSocket.OPEN && !l.closing)
        ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: b64(new Uint8Array(m.data.pcm)) }));
    };
    liveState('Listening…');
  };
  ws.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    if (ev.type === 'input_audio_buffer.speech_started') l.speech = true;
    if (ev.type === 'input_audio_buffer.speech_stopped') l.speech = false;
    onEvent(ev);
  };
  ws.onclose = async (e) => {
    if (live !== l) return;
    if (!opened) { // the handshake failed: say why if the API can
      let why = 'Could not open the Realtime session.';
      try { await getJSON('/v1/models'); } catch (err) { why = err.message; }
      liveError(why);
    } else if (e.code !== 1000) liveError('The session ended: ' + (e.reason || 'code ' + e.code));
    stopLive(true);
  };
}

// Stop: an open turn is committed and its transcript awaited (up to 5 s)
// before the socket closes with 1000.
function stopLive(now) {
  const l = live;
  if (!l) return;
  if (!now && !l.closing && l.speech && l.ws && l.ws.readyState === WebSocket.OPEN) {
    l.closing = true;
    l.ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    liveState('Finishing the last turn…');
    setTimeout(() => { if (live === l) stopLive(true); }, 5000);
    if (l.node) l.node.port.onmessage = null;
    return;
  }
  live = null;
  if (l.node) l.node.port.onmessage = null;
  if (l.stream) for (const t of l.stream.getTracks()) t.stop();
  if (l.ctx) l.ctx.close().catch(() => {});
  if (l.ws && l.ws.readyState <= WebSocket.OPEN) l.ws.close(1000, 'done');
  $('level').value = 0;
  $('partial').textContent = '';
  $('mic').setAttribute('aria-pressed', 'false');
  $('mic').textContent = '● Start microphone';
  liveState('Stopped.');
}
$('mic').addEventListener('click', () => (live ? stopLive(false) : startLive()));

$('model').addEventListener('change', updateGo);
loadModels().then(refreshStatus);
})();
