/*
 * libFuzzer target for the .npz archive reader (src/data/npz.c): the input is
 * a whole archive. Checked: reading the directory never reads outside the
 * buffer or leaks; for an archive it accepts, every member's bytes lie inside
 * the buffer (each is read) and no two overlap, and each member NAME.npy is
 * parsed as an array through sr_npz_array (whose own checks fuzz_npy holds).
 * Build and run with tools/fuzz.sh; seeds in tests/fuzz/seeds_fuzz_npz.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/npz.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sr_npz z;
    if (sr_npz_parse(&z, data, size, "fuzz.npz") != SR_OK)
        return 0;
    unsigned acc = 0;
    for (int i = 0; i < z.n; i++) {
        const struct sr_npz_member *m = &z.members[i];
        if (m->data < data || m->data + m->size > data + size)
            abort();
        for (uint64_t k = 0; k < m->size; k++)
            acc += m->data[k];
        for (int j = 0; j < i; j++) {
            const struct sr_npz_member *o = &z.members[j];
            if (m->size && o->size && m->data < o->data + o->size && o->data < m->data + m->size)
                abort();
        }
        size_t len = strlen(m->name);
        if (len > 4 && !strcmp(m->name + len - 4, ".npy")) {
            char key[SR_NPZ_NAME_MAX];
            memcpy(key, m->name, len - 4);
            key[len - 4] = '\0';
            struct sr_npy a;
            if (sr_npz_array(&z, key, &a) == SR_OK) {
                if (a.data < m->data || a.data > m->data + m->size)
                    abort();
                sr_npy_close(&a);
            }
        }
    }
    sink = acc;
    sr_npz_close(&z);
    return 0;
}
