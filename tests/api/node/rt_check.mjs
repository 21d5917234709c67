// The official OpenAI Node SDK's realtime client (openai/realtime/ws),
// unmodified, in a transcription session against whisperd, driven by
// tests/api/test_realtime.py. The SDK always opens wss://, so this script
// puts a TLS front of its own (node:tls, the test's self-signed key and
// certificate) before the daemon's plain port and tells the SDK's ws to
// accept that certificate.
// argv: daemon port, key.pem, cert.pem, raw audio file, format (pcm|pcmu),
//       mode (manual|vad). Prints one JSON line: the events' types and the
//       completed transcripts.
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';

const [port, keyPath, certPath, audioPath, format, mode] = process.argv.slice(2);
const front = tls.createServer({ key: fs.readFileSync(keyPath), cert: fs.readFileSync(certPath) },
  (s) => { const up = net.connect(Number(port), '127.0.0.1'); s.pipe(up).pipe(s);
           s.on('error', () => up.destroy()); up.on('error', () => s.destroy()); });
await new Promise((r) => front.listen(0, '127.0.0.1', r));
const client = new OpenAI({ baseURL: `https://127.0.0.1:${front.address().port}/v1`,
                            apiKey: 'sk-rt' });
const rt = new OpenAIRealtimeWS({ model: 'whisper-1', options: { rejectUnauthorized: false } },
                                client);
const types = [], transcripts = [], committed = [];
let sent = false, cleared = false;
const finished = new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error(`timed out: ${types.join(' ')}`)), 120000);
  rt.on('error', (e) => reject(new Error(`error event: ${JSON.stringify(e.error ?? e.message)}`)));
  rt.on('event', (ev) => {
    types.push(ev.type);
    if (ev.type === 'input_audio_buffer.committed') committed.push(ev.item_id);
    if (ev.type === 'input_audio_buffer.cleared') cleared = true;
    if (ev.type === 'conversation.item.input_audio_transcription.completed')
      transcripts.push([ev.item_id, ev.transcript]);
    if (sent && cleared && committed.length > 0 && transcripts.length === committed.length)
      resolve();
  });
});
await new Promise((r) => rt.socket.on('open', r));
rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: {
  format: format === 'pcmu' ? { type: 'audio/pcmu' } : { type: 'audio/pcm', rate: 24000 },
  transcription: { model: 'whisper-1', language: 'en' },
  turn_detection: mode === 'vad' ? { type: 'server_vad', silence_duration_ms: 800 } : null } } } });
const audio = fs.readFileSync(audioPath);
const piece = format === 'pcmu' ? 800 : 4800; // 100 ms
for (let i = 0; i < audio.length; i += piece)
  rt.send({ type: 'input_audio_buffer.append', audio: audio.subarray(i, i + piece).toString('base64') });
if (mode !== 'vad') rt.send({ type: 'input_audio_buffer.commit' });
rt.send({ type: 'input_audio_buffer.clear' });
sent = true;
await finished;
transcripts.sort((a, b) => committed.indexOf(a[0]) - committed.indexOf(b[0]));
console.log(JSON.stringify({ types, transcripts: transcripts.map((t) => t[1]) }));
rt.close();
front.close();
process.exit(0);
