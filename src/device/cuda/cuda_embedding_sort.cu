/*
 * The CUDA embedding backward's sort (cuda_embedding_backward.cu): the kept
 * ids sorted by the row bits of their keys, stable, with
 * cub::DeviceRadixSort::SortPairs (LSD radix), so that the ids of one (table,
 * row) lie together in their table-grouped order. Issued by the backward
 * itself, or ahead of it (group_ids: a graphed step sorts right after the
 * lookup, beside the dense forward).
 */
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>

#include "device/cuda/cuda_embedding.cuh"

template <typename K, typename V> static size_t sort_temp_bytes(int64_t n, int end_bit)
{
    size_t bytes = 0;
    SR_CU_CHECK(cub::DeviceRadixSort::SortPairs(NULL, bytes, (const K *)NULL, (K *)NULL,
                                                (const V *)NULL, (V *)NULL, (int)n, 0,
                                                end_bit > 0 ? end_bit : 1));
    return bytes;
}

/* The larger of the two value widths' needs (store_val). */
template <typename K> static size_t sort_temp_bytes(int64_t n, int end_bit)
{
    const size_t a = sort_temp_bytes<K, uint64_t>(n, end_bit);
    const size_t b = sort_temp_bytes<K, uint32_t>(n, end_bit);
    return a > b ? a : b;
}

size_t sr_cu_emb_sort_bytes(int64_t n, int end_bit, int key64)
{
    return key64 ? sort_temp_bytes<uint64_t>(n, end_bit) : sort_temp_bytes<uint32_t>(n, end_bit);
}

/* Sort the n kept ids (buffers 0) by the row bits of their keys (stable)
 * into buffers 1, the kept order left in place (lone_kernel reads it). With
 * R = 0 (one-row tables) the table-grouped order already has each row's ids
 * together: nothing is sorted and buffers 0 serve (sr_cu_emb_sorts). */
template <typename K, typename V>
static void sort_kept_as(const struct ws_view *v, int n, cudaStream_t st)
{
    size_t bytes = v->sort_bytes;
    SR_CU_CHECK(cub::DeviceRadixSort::SortPairs(v->sort, bytes, (const K *)v->key[0],
                                                (K *)v->key[1], (const V *)v->val[0],
                                                (V *)v->val[1], n, 0, v->row_bits, st));
}

int sr_cu_emb_sorts(const struct ws_view *v, int64_t n)
{
    return v->row_bits > 0 && n >= 2;
}

template <typename K>
static void sort_kept(const struct ws_view *v, int n, int plain_vals, cudaStream_t st)
{
    if (!sr_cu_emb_sorts(v, n))
        return;
    if (plain_vals)
        sort_kept_as<K, uint32_t>(v, n, st);
    else
        sort_kept_as<K, uint64_t>(v, n, st);
}

void sr_cu_emb_sort_kept(const struct ws_view *v, int n, int plain_vals, cudaStream_t st)
{
    if (v->key64)
        sort_kept<uint64_t>(v, n, plain_vals, st);
    else
        sort_kept<uint32_t>(v, n, plain_vals, st);
}

void sr_cu_emb_group_ids(struct sr_device *dev, const struct sr_emb_layout *layout,
                         const struct sr_emb_batch *batch, void *workspace, sr_stream_t s)
{
    const int64_t n = batch->table_pos[layout->num_tables];
    SR_ASSERT(n >= 0 && n <= layout->max_values);
    struct ws_view v;
    sr_cu_emb_ws_carve(layout, (char *)workspace, 1, &v);
    const int plain = sr_cu_emb_plain_vals(layout, batch);
    sr_cu_emb_sort_kept(&v, (int)n, plain, sr_cu_stream(dev, s));
}
