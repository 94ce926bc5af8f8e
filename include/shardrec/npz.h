/*
 * NumPy .npz archives as np.savez writes them: a zip file (zip64 where large)
 * whose members NAME.npy are .npy arrays stored uncompressed, so each is
 * memory-mapped in place (include/shardrec/npy.h). MLPerf's multi-hot Criteo
 * days (day_N_sparse_multi_hot.npz: members "0".."25", int32 (N, hotness))
 * are such archives.
 *
 * Read from the central directory (the end record, or zip64's when its
 * fields overflow): each member's name, method, sizes and local header
 * offset; the local header then gives where the data starts. Strict: a
 * member compressed (np.savez_compressed), encrypted or split over disks, a
 * size or offset outside the file, overlapping members, a name given twice,
 * a local header that disagrees with the directory, or more than
 * SR_NPZ_MAX_MEMBERS members is SR_ERR_DATA naming the file and the member. CRCs are not checked
 * (the arrays' own shape and size are).
 */
#ifndef SHARDREC_NPZ_H
#define SHARDREC_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/npy.h"

#define SR_NPZ_MAX_MEMBERS 4096
#define SR_NPZ_NAME_MAX    256

struct sr_npz_member {
    char name[SR_NPZ_NAME_MAX]; /* as stored, e.g. "3.npy" */
    const unsigned char *data;  /* its bytes, inside the archive */
    uint64_t size;
};

struct sr_npz {
    char *path;      /* owned (sr_npz_open), for messages */
    const void *map; /* the mapping (sr_npz_open), or NULL */
    size_t map_bytes;
    int n;
    struct sr_npz_member *members; /* (n) owned */
};

/* Read the directory of an archive image of n bytes at buf (members point
 * into buf). path is for messages (borrowed; z->path stays NULL). */
int sr_npz_parse(struct sr_npz *z, const unsigned char *buf, size_t n, const char *path);

/* Map and read the archive at path. SR_ERR_IO (cannot open or map), SR_ERR_DATA. */
int sr_npz_open(struct sr_npz *z, const char *path);
void sr_npz_close(struct sr_npz *z); /* safe on a zeroed or closed archive */

/* Member KEY.npy as an array (a view into the archive; a->path is
 * "ARCHIVE:KEY.npy", owned by a: sr_npy_close it). SR_ERR_DATA when the
 * member is missing or not an array this reads. */
int sr_npz_array(const struct sr_npz *z, const char *key, struct sr_npy *a);

#endif
