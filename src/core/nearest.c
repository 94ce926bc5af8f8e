/* The nearest known name (shardrec/nearest.h). */
#include <stdio.h>
#include <string.h>

#include "shardrec/nearest.h"

int sr_edit_distance(const char *a, const char *b)
{
    int row[64], n = (int)strlen(b);
    if (n >= 64 || strlen(a) >= 64)
        return 64;
    for (int j = 0; j <= n; j++)
        row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= n; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[n];
}

int sr_name_is_near(const char *s, const char *name)
{
    int len = (int)strlen(s), d = sr_edit_distance(s, name);
    int limit = len / 3 > 1 ? len / 3 : 1;
    if (len >= 3 && strncmp(s, name, (size_t)len) == 0)
        return 1; /* a shortened name: "pool" for "pooling" */
    return d <= limit && d < (int)strlen(name);
}

const char *sr_nearest_name(const char *s, const char *const *names, int n)
{
    const char *best = NULL;
    int best_d = 0;
    for (int k = 0; k < n; k++) {
        int d = sr_edit_distance(s, names[k]);
        if (sr_name_is_near(s, names[k]) && (!best || d < best_d))
            best = names[k], best_d = d;
    }
    return best;
}

void sr_name_hint(char *buf, size_t cap, const char *s, const char *const *names, int n)
{
    const char *near = sr_nearest_name(s, names, n);
    size_t len;
    if (near) {
        snprintf(buf, cap, "did you mean \"%s\"?", near);
        return;
    }
    len = (size_t)snprintf(buf, cap, "the known keys are");
    for (int k = 0; k < n && len < cap; k++) {
        if (len + strlen(names[k]) + 7 > cap) { /* ", NAME" and room for " ..." */
            snprintf(buf + len, cap - len, " ...");
            return;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s %s", k ? "," : "", names[k]);
    }
}
