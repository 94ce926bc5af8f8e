/*
 * The span recorder (core/trace.c) and the device spans built on its marker
 * (train/device_spans.c):
 *   - spans nest, their durations go to the per-stage accumulators, and only
 *     the window's steps are recorded;
 *   - the marker sees every recorded span's begin and end, paired and nested,
 *     and none while recording is off or past the nesting limit;
 *   - a claimed track takes spans from sr_trace_record_on up to its room,
 *     counting the rest as dropped;
 *   - on the deferred CPU device (ops run when waited for), device spans time
 *     what the device ran: a stage whose op takes 2 ms, and which the host
 *     only issued (the op had not run when its host span ended), has a device
 *     span of at least 2 ms, and stages follow each other on the device as on
 *     the host;
 *   - a pool of events run dry waits for the oldest span (counted) and loses
 *     none; spans begun or ended while paused (a graph capture) get no event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/clock.h"
#include "shardrec/device.h"
#include "shardrec/trace.h"
#include "device/cpu/cpu_device.h"
#include "train/device_spans.h"

/* The spans of the track named `name` (NULL and *n 0 when there is none). */
static const struct sr_trace_span *track(const char *name, size_t *n)
{
    for (int k = 0; k < sr_trace_num_tracks(); k++)
        if (strcmp(sr_trace_track_name(k), name) == 0)
            return sr_trace_track_spans(k, n);
    *n = 0;
    return NULL;
}

static void test_nesting_and_window(void **state)
{
    int64_t ns[SR_SPAN_COUNT];
    sr_trace_init(4, 64);
    sr_trace_thread_name("compute");
    sr_trace_set_window(3, 4);
    sr_trace_set_recording(1);
    sr_trace_take_stage_ns(ns);
    for (int64_t step = 1; step <= 5; step++) {
        sr_trace_set_step(step);
        sr_trace_begin(SR_SPAN_STEP, -1);
        sr_trace_begin(SR_SPAN_LOOKUP, -1);
        int64_t t0 = sr_clock_ns();
        while (sr_clock_ns() - t0 < 20000)
            ;
        sr_trace_end();
        sr_trace_end();
    }
    sr_trace_set_recording(0);
    sr_trace_take_stage_ns(ns);
    assert_true(ns[SR_SPAN_LOOKUP] >= 5 * 20000);
    assert_true(ns[SR_SPAN_STEP] >= ns[SR_SPAN_LOOKUP]);
    size_t n;
    const struct sr_trace_span *sp = track("compute", &n);
    assert_int_equal(n, 4); /* steps 3 and 4, two spans each, the child ending first */
    for (size_t i = 0; i < n; i += 2) {
        assert_int_equal(sp[i].span, SR_SPAN_LOOKUP);
        assert_int_equal(sp[i + 1].span, SR_SPAN_STEP);
        assert_int_equal(sp[i].step, 3 + (int64_t)i / 2);
        assert_true(sp[i + 1].t0 <= sp[i].t0 && sp[i].t1 <= sp[i + 1].t1);
    }
    sr_trace_free();
}

struct marks {
    int n, depth, max_depth;
    int span[64], end[64];
    int64_t step[64];
};

static void mark(void *ctx, enum sr_span s, int index, int64_t step, int end)
{
    struct marks *m = ctx;
    assert_true(m->n < 64);
    m->span[m->n] = s, m->end[m->n] = end, m->step[m->n] = step;
    m->n++;
    m->depth += end ? -1 : 1;
    assert_true(m->depth >= 0);
    if (m->depth > m->max_depth)
        m->max_depth = m->depth;
}

static void test_marker(void **state)
{
    struct marks m = {0};
    sr_trace_init(4, 64);
    sr_trace_set_marker(mark, &m);
    sr_trace_set_step(7);
    sr_trace_begin(SR_SPAN_STEP, -1); /* recording off: not marked */
    sr_trace_end();
    assert_int_equal(m.n, 0);
    sr_trace_set_recording(1);
    sr_trace_begin(SR_SPAN_STEP, -1);
    sr_trace_begin(SR_SPAN_BACKWARD, -1);
    sr_trace_end();
    sr_trace_begin(SR_SPAN_OPTIMIZER, -1);
    sr_trace_end();
    sr_trace_end();
    static const int want_span[] = {SR_SPAN_STEP, SR_SPAN_BACKWARD, SR_SPAN_BACKWARD,
                                    SR_SPAN_OPTIMIZER, SR_SPAN_OPTIMIZER, SR_SPAN_STEP};
    static const int want_end[] = {0, 0, 1, 0, 1, 1};
    assert_int_equal(m.n, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(m.span[i], want_span[i]);
        assert_int_equal(m.end[i], want_end[i]);
        assert_int_equal(m.step[i], 7);
    }
    /* 18 nested spans: the 16 the stack holds are marked, begins and ends paired */
    m = (struct marks){0};
    for (int i = 0; i < 18; i++)
        sr_trace_begin(SR_SPAN_LOOKUP, i);
    for (int i = 0; i < 18; i++)
        sr_trace_end();
    assert_int_equal(m.n, 32);
    assert_int_equal(m.max_depth, 16);
    assert_int_equal(m.depth, 0);
    sr_trace_set_marker(NULL, NULL);
    sr_trace_free();
}

static void test_claimed_track(void **state)
{
    sr_trace_init(2, 8);
    int k = sr_trace_track_claim("device compute");
    assert_true(k >= 0);
    for (int i = 0; i < 10; i++)
        sr_trace_record_on(k, SR_SPAN_LOOKUP, -1, 100 * i, 100 * i + 50, i);
    sr_trace_record_on(-1, SR_SPAN_LOOKUP, -1, 0, 1, 0);
    size_t n;
    const struct sr_trace_span *sp = track("device compute", &n);
    assert_int_equal(n, 8);
    assert_int_equal(sp[7].t0, 700);
    assert_int_equal(sp[7].step, 7);
    assert_int_equal(sr_trace_dropped(), 3); /* 2 past its room, 1 on no track */
    assert_int_equal(sr_trace_track_claim("another"), 1);
    assert_int_equal(sr_trace_track_claim("one too many"), -1);
    sr_trace_free();
}

static int spins_run; /* spin_2ms calls so far */

static void spin_2ms(void *arg)
{
    spins_run++;
    int64_t t0 = sr_clock_ns();
    while (sr_clock_ns() - t0 < 2000000)
        ;
}

static void test_device_spans_time_the_device(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_trace_init(4, 256);
    sr_trace_thread_name("compute");
    struct sr_device_spans *ds = sr_device_spans_create(dev, &(struct sr_device_span_streams){0});
    sr_trace_set_marker(sr_device_spans_mark, ds);
    sr_trace_set_recording(1);
    for (int64_t step = 1; step <= 3; step++) {
        sr_trace_set_step(step);
        sr_trace_begin(SR_SPAN_STEP, -1);
        sr_trace_begin(SR_SPAN_LOOKUP, -1);
        sr_dev_launch_host_fn(dev, NULL, spin_2ms, NULL); /* queued, not run */
        sr_trace_end();
        assert_int_equal(spins_run, 0); /* the host span was the issue only */
        sr_trace_begin(SR_SPAN_BOTTOM_MLP, -1);
        sr_dev_launch_host_fn(dev, NULL, spin_2ms, NULL);
        sr_trace_end();
        sr_trace_end();
        sr_device_spans_poll(ds); /* nothing has run: resolves nothing, waits for nothing */
    }
    sr_trace_set_recording(0);
    size_t n;
    assert_null(track("device compute", &n));
    assert_int_equal(spins_run, 0);
    sr_device_spans_drain(ds); /* waits: the queued ops run now */
    assert_int_equal(spins_run, 6);
    const struct sr_trace_span *dv = track("device compute", &n);
    assert_int_equal(n, 9);
    size_t nh;
    const struct sr_trace_span *host = track("compute", &nh);
    assert_int_equal(nh, 9);
    for (size_t i = 0; i < n; i += 3) { /* lookup, bottom_mlp, step: as they ended */
        const struct sr_trace_span *lk = &dv[i], *mlp = &dv[i + 1], *st = &dv[i + 2];
        assert_int_equal(lk->span, SR_SPAN_LOOKUP);
        assert_int_equal(mlp->span, SR_SPAN_BOTTOM_MLP);
        assert_int_equal(st->span, SR_SPAN_STEP);
        assert_int_equal(st->step, 1 + (int64_t)i / 3);
        /* the device spans hold the ops (1 us: float ms on the way) */
        assert_true(lk->t1 - lk->t0 >= 1999000 && mlp->t1 - mlp->t0 >= 1999000);
        /* run after issue, within the anchor's uncertainty */
        assert_true(lk->t0 >= host[i].t0 - sr_device_spans_anchor_ns(ds) - 50000);
        assert_true(st->t0 <= lk->t0 && lk->t1 <= mlp->t0 && mlp->t1 <= st->t1);
        if (i)
            assert_true(dv[i - 1].t1 <= st->t0); /* step i after step i - 1 */
    }
    assert_true(sr_device_spans_stage_ms(ds, SR_SPAN_LOOKUP) >= 2.0);
    assert_int_equal(sr_device_spans_steps(ds), 3);
    assert_int_equal(sr_device_spans_waits(ds), 0);
    sr_trace_set_marker(NULL, NULL);
    sr_device_spans_free(ds);
    sr_trace_free();
}

static void test_device_spans_pool_and_pause(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_trace_init(4, 4096);
    struct sr_device_spans *ds = sr_device_spans_create(dev, &(struct sr_device_span_streams){0});
    sr_trace_set_marker(sr_device_spans_mark, ds);
    sr_trace_set_recording(1);
    for (int i = 0; i < 1500; i++) { /* 3000 events, more than the pool's 2048 */
        sr_trace_begin(SR_SPAN_OPTIMIZER, i);
        sr_trace_end();
    }
    assert_true(sr_device_spans_waits(ds) > 0);
    sr_trace_begin(SR_SPAN_STEP, -1); /* ends while paused */
    sr_device_spans_pause(ds, 1);
    sr_trace_begin(SR_SPAN_LOOKUP, -1); /* begins while paused */
    sr_trace_end();
    sr_trace_end();
    sr_device_spans_pause(ds, 0);
    sr_device_spans_drain(ds);
    size_t n;
    const struct sr_trace_span *dv = track("device compute", &n);
    assert_int_equal(n, 1500);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(dv[i].span, SR_SPAN_OPTIMIZER);
        assert_int_equal(dv[i].index, (int)i);
        assert_true(dv[i].t1 >= dv[i].t0 && (i == 0 || dv[i].t0 >= dv[i - 1].t1));
    }
    sr_trace_set_marker(NULL, NULL);
    sr_device_spans_free(ds);
    sr_trace_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nesting_and_window),
        cmocka_unit_test(test_marker),
        cmocka_unit_test(test_claimed_track),
        cmocka_unit_test(test_device_spans_time_the_device),
        cmocka_unit_test(test_device_spans_pool_and_pause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
