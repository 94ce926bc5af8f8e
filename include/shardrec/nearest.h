/*
 * The nearest known name to a misspelt one, for "did you mean" hints in the
 * strict readers of config and plan files.
 */
#ifndef SHARDREC_NEAREST_H
#define SHARDREC_NEAREST_H

/* Levenshtein distance between a and b; 64 when either has 64 bytes or more. */
int sr_edit_distance(const char *a, const char *b);
/* Of names[0..n) (n >= 1), the one nearest to s (the first of equals). */
const char *sr_nearest_name(const char *s, const char *const *names, int n);

#endif
