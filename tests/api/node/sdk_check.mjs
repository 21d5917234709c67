// Drives the official OpenAI Node SDK, unmodified (only baseURL and apiKey
// set), against a running whisperd and prints one JSON document with what
// every call returned; tests/api/test_sdk_node.py checks it.
//
//   node sdk_check.mjs BASE_URL transcribe|translate AUDIO_FILE
//
// transcribe: audio.transcriptions.create for every response format (a file
//   stream, as the SDK sends it: chunked, fields after the file), stream: true,
//   a file built with toFile() from bytes, and the errors for an unknown model,
//   json + word timestamps and translations on an English-only model.
// translate: audio.translations.create for every response format.
import fs from 'node:fs';
import OpenAI, { toFile } from 'openai';

const [baseURL, mode, audio] = process.argv.slice(2);
if (!baseURL || !mode || !audio) {
  console.error('usage: node sdk_check.mjs BASE_URL transcribe|translate AUDIO_FILE');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'sk-whisperd-test' });
const FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'];

async function attempt(name, fmt, fn) {
  try {
    const payload = await fn();
    return { name, fmt, ok: true, payload };
  } catch (e) {
    if (e instanceof OpenAI.APIError) {
      return {
        name, fmt, ok: false,
        error: { cls: e.constructor.name, status: e.status ?? null, code: e.code ?? null,
                 param: e.param ?? null, type: e.type ?? null, message: e.message,
                 body: e.error ?? null },
      };
    }
    return { name, fmt, ok: false, error: { cls: e?.constructor?.name ?? 'Error', message: String(e) } };
  }
}

const results = [];
if (mode === 'transcribe') {
  for (const fmt of FORMATS) {
    results.push(await attempt('transcriptions', fmt, () =>
      client.audio.transcriptions.create({ file: fs.createReadStream(audio), model: 'whisper-1',
                                           response_format: fmt })));
  }
  results.push(await attempt('stream', 'json', async () => {
    const stream = await client.audio.transcriptions.create({
      file: fs.createReadStream(audio), model: 'whisper-1', stream: true });
    const events = [];
    for await (const ev of stream) events.push(ev);
    return events;
  }));
  results.push(await attempt('tofile', 'verbose_json', async () =>
    client.audio.transcriptions.create({
      file: await toFile(fs.readFileSync(audio), 'speech.wav'), model: 'tiny.en', language: 'en',
      temperature: 0, prompt: 'A speech.', response_format: 'verbose_json',
      timestamp_granularities: ['segment'] })));
  results.push(await attempt('unknown_model', 'json', () =>
    client.audio.transcriptions.create({ file: fs.createReadStream(audio), model: 'no-such-model' })));
  results.push(await attempt('word_json', 'json', () =>
    client.audio.transcriptions.create({ file: fs.createReadStream(audio), model: 'whisper-1',
                                         response_format: 'json',
                                         timestamp_granularities: ['word'] })));
  results.push(await attempt('translations_refused', 'json', () =>
    client.audio.translations.create({ file: fs.createReadStream(audio), model: 'whisper-1' })));
  results.push(await attempt('models', 'json', async () => {
    const page = await client.models.list();
    return page.data.map((m) => m.id);
  }));
} else if (mode === 'translate') {
  for (const fmt of FORMATS) {
    results.push(await attempt('translations', fmt, () =>
      client.audio.translations.create({ file: fs.createReadStream(audio), model: 'whisper-1',
                                         response_format: fmt })));
  }
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
console.log(JSON.stringify({ node: process.version, results }));
