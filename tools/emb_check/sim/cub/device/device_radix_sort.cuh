#pragma once
#include <algorithm>
#include <numeric>
#include <vector>
#include <cassert>
#include <cuda_runtime.h>
namespace cub {
template <class T> struct DoubleBuffer {
    T *d_buffers[2];
    int selector;
    DoubleBuffer(T *a, T *b) { d_buffers[0] = a; d_buffers[1] = b; selector = 0; }
    T *Current() { return d_buffers[selector]; }
};
extern long sim_sort_calls;
struct DeviceRadixSort {
    template <class K, class V>
    static cudaError_t SortPairs(void *tmp, size_t &bytes, DoubleBuffer<K> &k, DoubleBuffer<V> &v,
                                 int n, int begin_bit, int end_bit, cudaStream_t = 0)
    {
        if (!tmp) { bytes = 4096; return 0; }
        assert(bytes >= 4096);
        sim_sort_calls++;
        K *ks = k.Current(); V *vs = v.Current();
        /* cub sorts on bits [begin_bit, end_bit) only, stably */
        const unsigned long long mask =
            end_bit - begin_bit >= 64 ? ~0ull : (1ull << (end_bit - begin_bit)) - 1;
        auto digit = [&](int i) { return ((unsigned long long)ks[i] >> begin_bit) & mask; };
        std::vector<int> idx(n);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return digit(a) < digit(b); });
        std::vector<K> ko(n); std::vector<V> vo(n);
        for (int i = 0; i < n; i++) ko[i] = ks[idx[i]], vo[i] = vs[idx[i]];
        int passes = (end_bit - begin_bit + 7) / 8;
        int sel = k.selector ^ (passes & 1);
        std::copy(ko.begin(), ko.end(), k.d_buffers[sel]);
        std::copy(vo.begin(), vo.end(), v.d_buffers[sel]);
        if (sel != k.selector) { /* trash the old buffer as a real ping-pong would */
            memset(k.d_buffers[k.selector], 0xAB, sizeof(K) * n);
            memset(v.d_buffers[v.selector], 0xAB, sizeof(V) * n);
        }
        k.selector = v.selector = sel;
        return 0;
    }
};
}
