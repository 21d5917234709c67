/*
 * pystr.h - what Python would do to a string: the UTF-8 and white-space
 * rules of CPython's str that openai/whisper's text handling relies on.
 *
 * openai/whisper decodes token bytes with bytes.decode("utf-8",
 * errors="replace"), tests segments with text.strip(), computes the
 * compression ratio of decode(tokens).strip(), and its writers strip each
 * segment's text. Those are Unicode rules (U+3000 and U+00A0 are white
 * space to str.strip()), so every place that copies them uses these, and
 * they cannot drift apart.
 *
 * Not here on purpose: HTTP's optional white space (api/multipart.c, space
 * and tab only, RFC 9110) and the config file's syntax (daemon/config.c)
 * are not Python's rules.
 *
 * Threading: no state. ref: CPython Objects/unicodectype.c (isspace),
 * Objects/unicodeobject.c (strip, the UTF-8 decoder's error handling);
 * Unicode 15 section 3.9, "U+FFFD Substitution of Maximal Subparts".
 */
#ifndef WD_PYSTR_H
#define WD_PYSTR_H

#include <stddef.h>
#include <stdint.h>

#define WD_PY_REPLACEMENT 0xfffdu /* what errors="replace" puts for a bad subpart */

/*
 * Length of the well-formed UTF-8 character at s[0..n) (n >= 1), or the
 * negated length of its maximal ill-formed prefix (at least 1 byte): what
 * Python's strict decoder accepts (shortest form, no surrogates, nothing
 * above U+10FFFF), and the unit errors="replace" replaces otherwise.
 */
long wd_utf8_seq(const unsigned char *s, size_t n);

/* Decodes s[0..n) as bytes.decode("utf-8", errors="replace"): out needs
 * room for n code points. Returns the number written. */
size_t wd_utf8_decode(const unsigned char *s, size_t n, uint32_t *out);

/* Writes code point cp (<= U+10FFFF) as UTF-8 to buf; returns 1..4. */
size_t wd_utf8_put(uint32_t cp, char *buf);

/* Python's str.isspace() for one code point. */
int wd_py_isspace(uint32_t cp);

/* Python's str.strip() with no argument, on s[0..n): returns the start of
 * the stripped span and its length in *ret_n. Bytes that are not valid
 * UTF-8 are not white space (Python would have replaced them first). */
const char *wd_py_strip(const char *s, size_t n, size_t *ret_n);

#endif
