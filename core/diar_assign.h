/*
 * diar_assign.h - who said each word: a transcript's segments and words
 * attributed to the speakers of a diarization (diar.h), and the speakers'
 * labels for OpenAI's diarized_json ("A", "B", ... or known speakers' names).
 *
 * The rule is WhisperX's (assign_word_speakers): a word goes to the speaker
 * whose turns overlap it longest. A word that overlaps no turn goes to the
 * nearest turn's speaker when that turn is within WD_DIAR_ASSIGN_NEAR_S of
 * it, else to its segment's majority speaker (the speaker of most of the
 * segment's attributed words, ties to the one whose turns overlap the whole
 * segment longest). A segment without words goes by the overlap of the whole
 * segment, then by the nearest turn, however far. Where a segment's words
 * change speaker the segment is cut: each piece's text is its words' text
 * joined exactly (Whisper's leading spaces kept); an uncut segment keeps its
 * own text. Pieces start at their first word (the first piece at the
 * segment's start) and end at their last (the last piece at the segment's
 * end). Segments without text (white space at most) are left out.
 *
 * With no turns at all (a diarization that found no speech, or none run)
 * every segment is given to one speaker, "A": the transcript still has text,
 * and diarized_json has no way to say "nobody".
 *
 * Speakers of the result are numbered 0, 1, ... in order of first appearance
 * in the diarized segments (not in the turns: a speaker whose turns hold no
 * word does not appear).
 *
 * Pure functions; the caller owns and frees what they return.
 */
#ifndef WD_DIAR_ASSIGN_H
#define WD_DIAR_ASSIGN_H

#include <stddef.h>

#include "diar.h"
#include "transcript.h"

/* A word that overlaps no turn takes the nearest turn's speaker when the gap
 * is at most this many seconds (a word timed just outside a turn's edge). */
#define WD_DIAR_ASSIGN_NEAR_S 1.0

/* Known speakers: a cluster is given a reference's name when the cosine of
 * its centroid and the reference's embedding is at least this. Measured
 * with CAM++ zh_en in PyTorch on sample.wav's two voices (clean clips of
 * 1.5-3.2 s as references, the mean of a voice's other clips as its
 * centroid): the same voice 0.77 and 0.78, the other voice 0.30 and 0.40;
 * clip against clip, same 0.40-0.83, different 0.07-0.44. 0.5 leaves room
 * on both sides; to be checked again on the evaluation sets. */
#define WD_DIAR_KNOWN_MIN_COS 0.5f

/* The most known speakers a request may name (OpenAI's limit). */
#define WD_DIAR_MAX_KNOWN 4

typedef struct {
  double start, end; /* seconds */
  int speaker;       /* 0, 1, ... in order of first appearance (see above) */
  char *text;        /* owned; leading space kept */
} wd_diar_seg_t;

typedef struct {
  wd_diar_seg_t *segs;  /* in the transcript's order (time order) */
  int n_segs;
  int n_speakers;
  int *turn_speaker;    /* (n_speakers): the diarization's speaker each is, or -1
                         * for the one speaker of a diarization without turns */
} wd_diar_segs_t;

/* Attributes t's segments to r's turns (r may have no turns; r NULL is taken
 * as none). Fills *out (free it with wd_diar_segs_free). 0 or WD_ENOMEM. */
int wd_diar_assign(const wd_transcript_t *t, const wd_diar_result_t *r, wd_diar_segs_t *out);

void wd_diar_segs_free(wd_diar_segs_t *s); /* accepts zeroed */

/*
 * Known speakers matched to the diarization's speakers: pairs (speaker k,
 * reference j) with cos(centroid k, ref j) >= min_cos are taken best first,
 * each speaker and each reference at most once. known[k] gets j, or -1 for
 * a speaker left unnamed. centroids: (n_speakers, WD_DIAR_EMB_DIM), refs:
 * (n_refs, WD_DIAR_EMB_DIM), both L2-normalized.
 */
void wd_diar_match_known(const float *centroids, int n_speakers, const float *refs, int n_refs,
                         float min_cos, int *known);

/*
 * The label of each speaker of s, into labels[0..s->n_speakers) (malloc'd
 * strings; free with wd_diar_labels_free): names[known[turn_speaker[k]]]
 * where the diarization's speaker was matched (known may be NULL: none),
 * else letters A, B, ..., Z, AA, AB, ... given in order of first appearance
 * to the unnamed speakers only, skipping none. 0 or WD_ENOMEM.
 */
int wd_diar_labels(const wd_diar_segs_t *s, const int *known, const char *const *names,
                   char **labels);
void wd_diar_labels_free(char **labels, int n);

#endif
