/*
 * ws.h - the WebSocket protocol (RFC 6455) as /v1/realtime speaks it: the
 * handshake's accept key, a parser that takes a client's bytes in pieces
 * of any size and gives whole messages, and the header of a server frame.
 *
 * Parser rules (a client that breaks one gets the close code in *ret_close
 * and the connection ends): every client frame masked (1002), no RSV bits
 * (no extensions were agreed: 1002), known opcodes only (1002), control
 * frames at most 125 bytes and never fragmented (1002), continuation frames
 * only inside a fragmented message and a new message never inside one
 * (1002), a message (all its fragments) at most max_message bytes (1009;
 * each message counted alone), a close frame's payload empty or a code an
 * endpoint may send (1002 for a 1-byte payload, 0-999, 1004-1006,
 * 1015-2999 and 5000 up) with a UTF-8 reason (1007).
 * Control frames (close, ping, pong) may come between fragments and are
 * given as their own messages. Text is not checked for UTF-8 here: the
 * session's JSON parser refuses it with an error event.
 * Nothing here touches a socket or a thread.
 */
#ifndef WD_WS_H
#define WD_WS_H

#include <stddef.h>
#include <stdint.h>

enum {
  WD_WS_CONT = 0x0, WD_WS_TEXT = 0x1, WD_WS_BINARY = 0x2,
  WD_WS_CLOSE = 0x8, WD_WS_PING = 0x9, WD_WS_PONG = 0xA,
};

/* A message buffer larger than this is freed once its message has been
 * delivered (the next message grows a new one). 1 MiB: above the appends
 * clients stream (~64 KB of base64 per second of 24 kHz PCM16), so a
 * steady stream reuses its buffer, while a 16 MiB message leaves none. */
#define WD_WS_KEEP_BYTES (1024u * 1024u)

/* Close codes (RFC 6455 7.4.1). */
enum {
  WD_WS_CLOSE_NORMAL = 1000, WD_WS_CLOSE_GOING_AWAY = 1001, WD_WS_CLOSE_PROTOCOL = 1002,
  WD_WS_CLOSE_BAD_DATA = 1007, WD_WS_CLOSE_POLICY = 1008, WD_WS_CLOSE_TOO_BIG = 1009, WD_WS_CLOSE_ERROR = 1011,
};

/* base64(SHA-1(key + the RFC's GUID)): 28 characters and a NUL into out.
 * Returns 0, or WD_EINVAL for a key that is not 24 base64 characters. */
int wd_ws_accept_key(const char *key, char out[29]);

/* Whether a comma-separated header value (Upgrade, Connection,
 * Sec-WebSocket-Protocol) holds token: compared without case when nocase
 * (Upgrade and Connection), exactly otherwise (a subprotocol answered must
 * be one the client offered, byte for byte). value NULL: no. */
int wd_ws_has_token(const char *value, const char *token, int nocase);

/* The first token of such a value that starts with prefix (exactly): what
 * follows the prefix, its length in *ret_len; NULL when there is none. */
const char *wd_ws_token_after(const char *value, const char *prefix, size_t *ret_len);

/* SHA-1 of data (20 bytes into out): the handshake's only use of it. */
void wd_ws_sha1(const void *data, size_t n, unsigned char out[20]);

/* A whole message: opcode (TEXT, BINARY, CLOSE, PING, PONG) and payload,
 * valid during the call. Returns 0 to go on, or nonzero to stop feeding
 * (wd_ws_feed then returns it). */
typedef int (*wd_ws_on_message_t)(void *ud, int opcode, const unsigned char *data, size_t n);

typedef struct {
  size_t max_message;          /* bytes of one message at most */
  /* the frame being read */
  unsigned char hdr[14];
  int hdr_have, hdr_need;
  int opcode, fin;
  unsigned char mask[4];
  uint64_t len, got;
  unsigned char ctl[125];      /* a control frame's payload */
  /* the data message being assembled from fragments */
  unsigned char *msg;
  size_t msg_len, msg_cap;
  int msg_opcode;              /* 0: none open */
} wd_ws_parser_t;

void wd_ws_parser_init(wd_ws_parser_t *p, size_t max_message);
void wd_ws_parser_free(wd_ws_parser_t *p);

/* Feeds n bytes. Returns 0 (all taken; any messages completed were given
 * to on_message), what on_message returned when it stopped the feed, or
 * WD_EFORMAT / WD_ETOOBIG / WD_ENOMEM with the close code to send in
 * *ret_close (the connection is then done). */
int wd_ws_feed(wd_ws_parser_t *p, const void *data, size_t n, wd_ws_on_message_t on_message,
               void *ud, int *ret_close);

/* The header of an unmasked server frame with FIN set: its length (2, 4 or
 * 10 bytes) written into hdr. */
size_t wd_ws_frame_header(int opcode, uint64_t len, unsigned char hdr[10]);

#endif
