/*
 * api.h - the HTTP API (OpenAI-compatible /v1/audio/*, /health, /metrics).
 *
 * Placeholder for the API issue: the server, multipart parsing and response
 * rendering land here. Depends on core/ only; never on gpu/ (the worker
 * thread owns the GPU and answers through the job queue).
 */
#ifndef WD_API_H
#define WD_API_H

/* The API version string reported by /v1/models and --version. */
#define WD_API_OPENAI_COMPAT "v1"

#endif
