/*
 * NumPy .npz archives, read-only and memory-mapped (include/shardrec/npz.h):
 * the zip central directory (zip64 where its fields overflow), members
 * stored uncompressed, each an .npy array read in place.
 *
 *   local header   30 bytes + name + extra, then the member's bytes
 *   central entry  46 bytes + name + extra + comment (one per member)
 *   zip64 end      56 bytes (when the end record's fields are full) + locator 20
 *   end record     22 bytes + comment (at most 65535 bytes): ends the file
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/npz.h"

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END     0x06054b50u
#define SIG_END64   0x06064b50u
#define SIG_LOC64   0x07064b50u
#define END_BYTES   22
#define LOC64_BYTES 20
#define END64_BYTES 56
#define CENTRAL     46
#define LOCAL       30
#define FULL16      0xFFFFu
#define FULL32      0xFFFFFFFFu

static uint16_t u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const unsigned char *p)
{
    return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

static int bad(const char *path, const char *what)
{
    return sr_error_set(SR_ERR_DATA, "%s: not an .npz archive this reads: %s", path, what);
}

/* Where the directory is: its offset, size and entry count. */
struct dir {
    uint64_t offset, size, entries;
};

/* The end record, searched back from the end over its comment. */
static int find_end(const unsigned char *buf, size_t n, size_t *at)
{
    if (n < END_BYTES)
        return 0;
    size_t lowest = n - END_BYTES > 65535 ? n - END_BYTES - 65535 : 0;
    for (size_t p = n - END_BYTES + 1; p-- > lowest;)
        if (u32(buf + p) == SIG_END && p + END_BYTES + u16(buf + p + 20) == n) {
            *at = p;
            return 1;
        }
    return 0;
}

/* The zip64 end record, from its locator just before the end record. */
static int read_end64(const unsigned char *buf, size_t end, struct dir *d, const char *path)
{
    if (end < LOC64_BYTES || u32(buf + end - LOC64_BYTES) != SIG_LOC64)
        return bad(path, "the end record is full but there is no zip64 locator");
    const unsigned char *loc = buf + end - LOC64_BYTES;
    const uint64_t at = u64(loc + 8);
    if (u32(loc + 4) != 0 || u32(loc + 16) > 1 || at > end - LOC64_BYTES ||
        end - LOC64_BYTES - at < END64_BYTES || u32(buf + at) != SIG_END64)
        return bad(path, "a bad zip64 end record");
    const unsigned char *e = buf + at;
    if (u32(e + 16) != 0 || u32(e + 20) != 0 || u64(e + 24) != u64(e + 32))
        return bad(path, "an archive split over several disks");
    d->entries = u64(e + 32);
    d->size = u64(e + 40);
    d->offset = u64(e + 48);
    return SR_OK;
}

static int read_dir(const unsigned char *buf, size_t n, struct dir *d, const char *path)
{
    size_t end;
    if (!find_end(buf, n, &end))
        return bad(path, "no zip end record");
    const unsigned char *e = buf + end;
    if (u16(e + 4) != 0 || u16(e + 6) != 0 || u16(e + 8) != u16(e + 10))
        return bad(path, "an archive split over several disks");
    d->entries = u16(e + 10);
    d->size = u32(e + 12);
    d->offset = u32(e + 16);
    int rc = SR_OK;
    if (d->entries == FULL16 || d->size == FULL32 || d->offset == FULL32)
        rc = read_end64(buf, end, d, path);
    if (!rc && (d->offset > end || d->size > end - d->offset))
        rc = bad(path, "the central directory lies outside the file");
    if (!rc && d->entries > SR_NPZ_MAX_MEMBERS)
        rc = bad(path, "more members than this reads");
    return rc;
}

/* An entry's 64-bit values from its zip64 extra field, where the 32-bit
 * fields are full (in the order: size, compressed size, offset). */
static int zip64_fields(const unsigned char *extra, size_t len, uint64_t *size, uint64_t *csize,
                        uint64_t *offset)
{
    uint64_t *want[3] = {size, csize, offset};
    while (len >= 4) {
        const uint16_t id = u16(extra), n = u16(extra + 2);
        if (n > len - 4)
            return 0;
        if (id == 1) {
            size_t at = 4;
            for (int k = 0; k < 3; k++)
                if (*want[k] == FULL32) {
                    if (at + 8 > 4 + (size_t)n)
                        return 0;
                    *want[k] = u64(extra + at);
                    at += 8;
                }
            return 1;
        }
        extra += 4 + n;
        len -= 4 + (size_t)n;
    }
    return *size != FULL32 && *csize != FULL32 && *offset != FULL32;
}

static int member_error(const char *path, const char *name, const char *what)
{
    return sr_error_set(SR_ERR_DATA, "%s: member '%s': %s", path, name, what);
}

/* The local header at offset: its name must be the directory's; the data
 * follows it, inside the file and before the directory. */
static int locate(const unsigned char *buf, const struct dir *d, uint64_t offset,
                  struct sr_npz_member *m, const char *path)
{
    const size_t nl = strlen(m->name);
    if (offset > d->offset || d->offset - offset < LOCAL || u32(buf + offset) != SIG_LOCAL)
        return member_error(path, m->name, "its local header is missing");
    const unsigned char *h = buf + offset;
    const uint64_t start = offset + LOCAL + u16(h + 26) + u16(h + 28);
    if (u16(h + 26) != nl || start > d->offset || memcmp(h + LOCAL, m->name, nl) ||
        u16(h + 6) & 1 || u16(h + 8) != 0) /* encrypted, or compressed */
        return member_error(path, m->name, "its local header disagrees with the directory");
    if (m->size > d->offset - start)
        return member_error(path, m->name, "its data runs past the directory");
    m->data = buf + start;
    return SR_OK;
}

/* Central entry at *p (advanced past it) into m. */
static int read_entry(const unsigned char *buf, const struct dir *d, uint64_t *p,
                      struct sr_npz_member *m, const char *path)
{
    const uint64_t end = d->offset + d->size;
    if (end - *p < CENTRAL || u32(buf + *p) != SIG_CENTRAL)
        return bad(path, "a damaged central directory");
    const unsigned char *e = buf + *p;
    const size_t nl = u16(e + 28), xl = u16(e + 30), cl = u16(e + 32);
    if (end - *p - CENTRAL < nl + xl + cl)
        return bad(path, "a damaged central directory");
    if (nl == 0 || nl >= SR_NPZ_NAME_MAX || memchr(e + CENTRAL, '\0', nl))
        return bad(path, "a member name that is empty, too long or holds a NUL byte");
    memcpy(m->name, e + CENTRAL, nl);
    m->name[nl] = '\0';
    uint64_t size = u32(e + 24), csize = u32(e + 20), offset = u32(e + 42);
    if (!zip64_fields(e + CENTRAL + nl, xl, &size, &csize, &offset))
        return member_error(path, m->name, "a bad zip64 field");
    if (u16(e + 8) & 1)
        return member_error(path, m->name, "encrypted");
    if (u16(e + 10) != 0 || csize != size)
        return member_error(path, m->name,
                            "compressed (np.savez_compressed); HINT: save with np.savez");
    if (u16(e + 34) != 0 && u16(e + 34) != FULL16)
        return bad(path, "an archive split over several disks");
    m->size = size;
    *p += CENTRAL + nl + xl + cl;
    return locate(buf, d, offset, m, path);
}

static int by_start(const void *a, const void *b)
{
    const struct sr_npz_member *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct sr_npz_member *)a)->name, ((const struct sr_npz_member *)b)->name);
}

/* No two members share a byte or a name (checked on sorted copies). */
static int check_disjoint(const struct sr_npz *z, const char *path)
{
    struct sr_npz_member *s = sr_malloc(sizeof *s * (size_t)(z->n ? z->n : 1));
    memcpy(s, z->members, sizeof *s * (size_t)z->n);
    qsort(s, (size_t)z->n, sizeof *s, by_start);
    int rc = SR_OK;
    for (int i = 1; i < z->n && !rc; i++)
        if (s[i].data < s[i - 1].data + s[i - 1].size)
            rc = member_error(path, s[i].name, "overlaps another member");
    qsort(s, (size_t)z->n, sizeof *s, by_name);
    for (int i = 1; i < z->n && !rc; i++)
        if (!strcmp(s[i].name, s[i - 1].name))
            rc = member_error(path, s[i].name, "given twice");
    sr_free(s);
    return rc;
}

int sr_npz_parse(struct sr_npz *z, const unsigned char *buf, size_t n, const char *path)
{
    struct dir d = {0, 0, 0};
    memset(z, 0, sizeof *z);
    int rc = read_dir(buf, n, &d, path);
    if (rc)
        return rc;
    z->members = sr_calloc(d.entries ? d.entries : 1, sizeof *z->members);
    uint64_t p = d.offset;
    for (uint64_t i = 0; !rc && i < d.entries; i++) {
        rc = read_entry(buf, &d, &p, &z->members[i], path);
        z->n = rc ? z->n : (int)i + 1;
    }
    if (!rc && p != d.offset + d.size)
        rc = bad(path, "the central directory's size disagrees with its entries");
    if (!rc)
        rc = check_disjoint(z, path);
    if (rc) {
        sr_free(z->members);
        memset(z, 0, sizeof *z);
    }
    return rc;
}

int sr_npz_open(struct sr_npz *z, const char *path)
{
    const void *map;
    size_t size;
    memset(z, 0, sizeof *z);
    int rc = sr_file_map(path, &map, &size);
    if (!rc && (rc = sr_npz_parse(z, map, size, path)))
        sr_file_unmap(map, size);
    if (rc)
        return rc;
    z->map = map;
    z->map_bytes = size;
    z->path = sr_strdup(path);
    return SR_OK;
}

void sr_npz_close(struct sr_npz *z)
{
    sr_file_unmap(z->map, z->map_bytes);
    sr_free(z->members);
    sr_free(z->path);
    memset(z, 0, sizeof *z);
}

int sr_npz_array(const struct sr_npz *z, const char *key, struct sr_npy *a)
{
    char name[SR_NPZ_NAME_MAX + 8], label[4096 + SR_NPZ_NAME_MAX];
    const char *path = z->path ? z->path : "npz";
    snprintf(name, sizeof name, "%s.npy", key);
    snprintf(label, sizeof label, "%s:%s", path, name);
    memset(a, 0, sizeof *a);
    for (int i = 0; i < z->n; i++) {
        if (strcmp(z->members[i].name, name))
            continue;
        int rc = sr_npy_parse(a, z->members[i].data, (size_t)z->members[i].size, label);
        if (!rc)
            a->path = sr_strdup(label);
        return rc;
    }
    return sr_error_set(SR_ERR_DATA, "%s: no member '%s' (it has %d)", path, name, z->n);
}
