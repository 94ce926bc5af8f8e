/*
 * The opaque CPU device (device/cpu/cpu_opaque.c, SR_CPU_DEFERRED=opaque):
 *   - ops, copies, memsets and host functions work, with the immediate CPU
 *     device's results, and its host memory (sr_dev_alloc_host) is ordinary;
 *   - the host reading or writing device memory outside an op, a host
 *     function touching it, and a touch of a freed allocation each end the
 *     process with SIGABRT and a message that says what happened (each in a
 *     fresh process: this binary run with the scenario's name);
 *   - sr_dev_hidden finds the allocation of any pointer into it;
 *   - a world of one bound to the device moves device and host buffers of
 *     every collective (comm.h's staging), with the right values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"

static const char *self_path;

static struct sr_device *opaque(void)
{
    return sr_cpu_opaque_device();
}

/* dst (host) <- n floats of device memory, waited for. */
static void read_back(struct sr_device *dev, float *dst, const float *src, size_t n)
{
    sr_dev_copy(dev, dst, src, sizeof(float) * n, NULL);
    sr_dev_sync(dev, NULL);
}

static void test_ops_and_copies(void **state)
{
    struct sr_device *dev = opaque(), *cpu = sr_cpu_device();
    assert_int_equal(dev->host_visible, 0);
    assert_int_equal(dev->host_immediate, 0);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, -1, 2, 0.25f, 3, -2}, want[4], got[4];
    cpu->dense->gemm(cpu, NULL, SR_NO_TRANS, SR_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, want, 2);
    float *da = sr_dev_alloc(dev, sizeof a), *db = sr_dev_alloc(dev, sizeof b);
    float *dc = sr_dev_alloc_zero(dev, sizeof got);
    sr_dev_copy(dev, da, a, sizeof a, NULL);
    sr_dev_copy(dev, db, b, sizeof b, NULL);
    dev->dense->gemm(dev, NULL, SR_NO_TRANS, SR_NO_TRANS, 2, 2, 3, 1.0f, da, 3, db, 2, 0.0f, dc, 2);
    float *h = sr_dev_alloc_host(dev, sizeof got); /* ordinary memory: the host writes it */
    memset(h, 0, sizeof got);
    read_back(dev, h, dc, 4);
    memcpy(got, h, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    sr_dev_memset(dev, dc, 0, sizeof got, NULL);
    read_back(dev, h, dc, 4);
    assert_true(h[0] == 0.0f && h[3] == 0.0f);
    sr_dev_free_host(dev, h);
    sr_dev_free(dev, da);
    sr_dev_free(dev, db);
    sr_dev_free(dev, dc);
}

static void test_hidden_finds_the_allocation(void **state)
{
    struct sr_device *dev = opaque();
    char *d = sr_dev_alloc(dev, 1000), host[8];
    void *base = NULL;
    size_t bytes = 0;
    assert_int_equal(sr_dev_hidden(dev, d + 999, &base, &bytes), 1);
    assert_ptr_equal(base, d);
    assert_int_equal(bytes, 1000);
    assert_int_equal(sr_dev_hidden(dev, d + 1000, NULL, NULL), 0); /* past its end */
    assert_int_equal(sr_dev_hidden(dev, host, NULL, NULL), 0);
    assert_int_equal(sr_dev_hidden(dev, NULL, NULL, NULL), 0);
    assert_int_equal(sr_dev_hidden(sr_cpu_device(), host, NULL, NULL), 0);
    sr_dev_free(dev, d);
    assert_int_equal(sr_dev_hidden(dev, d, NULL, NULL), 0); /* freed */
}

/* ---- faults, each in a fresh process ------------------------------------------ */

static void touch_fn(void *arg)
{
    volatile float *p = arg;
    p[0] = 1.0f;
}

/* The scenario `name`, run by the child; it returns only if nothing faulted. */
static void scenario(const char *name)
{
    struct sr_device *dev = opaque();
    volatile float *d = sr_dev_alloc_zero(dev, 4096);
    if (strcmp(name, "read") == 0) {
        printf("%f\n", d[5]);
    } else if (strcmp(name, "write") == 0) {
        d[5] = 2.0f;
    } else if (strcmp(name, "freed") == 0) {
        sr_dev_free(dev, (void *)d);
        printf("%f\n", d[0]);
    } else if (strcmp(name, "host_fn") == 0) {
        sr_dev_launch_host_fn(dev, NULL, touch_fn, (void *)d);
        sr_dev_sync(dev, NULL);
    }
}

/* Run scenario `name` in a child; its stderr into buf; its wait status. */
static int run_child(const char *name, char *buf, size_t cap)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        dup2(fd[1], 1);
        close(fd[0]);
        execl(self_path, self_path, name, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void expect_abort(const char *name, const char *text)
{
    char out[8192];
    int status = run_child(name, out, sizeof out);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT || !strstr(out, text))
        fail_msg("scenario %s: status %d, want SIGABRT and \"%s\"; output:\n%s", name, status, text,
                 out);
}

static void test_host_read_aborts(void **state)
{
    expect_abort("read", "opaque device: the host read device memory");
    expect_abort("read", "inside a live device allocation");
    expect_abort("read", "that allocation: 4096 bytes");
}

static void test_host_write_aborts(void **state)
{
    expect_abort("write", "opaque device: the host wrote device memory");
}

static void test_freed_aborts(void **state)
{
    expect_abort("freed", "inside a FREED device allocation");
}

static void test_host_function_aborts(void **state)
{
    expect_abort("host_fn", "opaque device: the host wrote device memory");
}

/* ---- a world of one on device memory -------------------------------------------- */

static void test_single_rank_collectives(void **state)
{
    struct sr_device *dev = opaque();
    sr_comm_t c = sr_comm_init_single();
    sr_comm_bind_device(c, dev);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {0};
    float *d = sr_dev_alloc(dev, sizeof x), *e = sr_dev_alloc_zero(dev, sizeof x);
    float *h = sr_dev_alloc_host(dev, sizeof x);
    sr_dev_copy(dev, d, x, sizeof x, NULL);
    sr_comm_register(c, d);
    /* device -> device: a copy on the stream */
    sr_comm_all_reduce(c, d, e, 8, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    read_back(dev, h, e, 8);
    assert_memory_equal(h, x, sizeof x);
    /* device -> host: staged out, the host result ready at return */
    sr_comm_all_gather(c, d + 2, y, 4, SR_DTYPE_F32, NULL, NULL);
    assert_memory_equal(y, x + 2, 4 * sizeof(float));
    /* host -> device, non-blocking: staged in at the wait */
    float z[4] = {-1, -2, -3, -4};
    sr_comm_work_t w = NULL;
    sr_comm_broadcast(c, z, e + 4, 4, SR_DTYPE_F32, 0, NULL, &w);
    sr_comm_wait(c, w);
    read_back(dev, h, e, 8);
    assert_memory_equal(h + 4, z, sizeof z);
    assert_memory_equal(h, x, 4 * sizeof(float));
    /* all-to-all-v between displaced regions of one allocation */
    size_t sc[1] = {2}, sd[1] = {1}, rc[1] = {2}, rd[1] = {6};
    sr_comm_all_to_allv(c, d, sc, sd, d, rc, rd, SR_DTYPE_F32, NULL, NULL);
    read_back(dev, h, d, 8);
    float want[8] = {1, 2, 3, 4, 5, 6, 2, 3};
    assert_memory_equal(h, want, sizeof want);
    assert_int_equal(sr_comm_counters(c)->calls[SR_COLL_ALL_TO_ALLV], 1);
    sr_dev_free_host(dev, h);
    sr_dev_free(dev, d);
    sr_dev_free(dev, e);
    sr_comm_free(c);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc > 1) {
        scenario(argv[1]);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_and_copies),
        cmocka_unit_test(test_hidden_finds_the_allocation),
        cmocka_unit_test(test_host_read_aborts),
        cmocka_unit_test(test_host_write_aborts),
        cmocka_unit_test(test_freed_aborts),
        cmocka_unit_test(test_host_function_aborts),
        cmocka_unit_test(test_single_rank_collectives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
