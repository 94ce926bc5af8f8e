/* The nearest known name (shardrec/nearest.h). */
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

const char *sr_nearest_name(const char *s, const char *const *names, int n)
{
    const char *best = names[0];
    int best_d = sr_edit_distance(s, best);
    for (int k = 1; k < n; k++) {
        int d = sr_edit_distance(s, names[k]);
        if (d < best_d)
            best = names[k], best_d = d;
    }
    return best;
}
