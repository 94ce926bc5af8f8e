/*
 * The nearest known name to a misspelt one, for "did you mean" hints in the
 * strict readers of config and plan files. A name is offered only when it is
 * near: a hint of an unrelated key ("trace" -> "lr") misleads more than none.
 */
#ifndef SHARDREC_NEAREST_H
#define SHARDREC_NEAREST_H

#include <stddef.h>

/* Levenshtein distance between a and b; 64 when either has 64 bytes or more. */
int sr_edit_distance(const char *a, const char *b);
/* Whether `name` is near enough to the unknown `s` to be offered for it: at
 * most max(1, strlen(s) / 3) edits away and fewer edits than `name` has bytes
 * (never a short unrelated name), or s is its first 3 or more bytes. */
int sr_name_is_near(const char *s, const char *name);
/* Of the names[0..n) near s (sr_name_is_near), the nearest (the first of
 * equals); NULL when none is near. */
const char *sr_nearest_name(const char *s, const char *const *names, int n);
/* The hint for the unknown s: `did you mean "NAME"?` with the nearest near
 * name, else `the known keys are a, b, c` (as many as fit). Into buf (cap
 * bytes, NUL-terminated). */
void sr_name_hint(char *buf, size_t cap, const char *s, const char *const *names, int n);

#endif
