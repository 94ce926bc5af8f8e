/*
 * Atomic writes and output-path checks (include/shardrec/atomic_file.h):
 * a write replaces its target whole; the temporary file lies beside the
 * target under a fresh random name and is a regular file; a symbolic link at
 * the target is replaced, and the file it points to is untouched; links planted
 * at predictable temporary names are irrelevant; a failed, aborted or
 * signal-killed write leaves the old file and no temporary file; the start-up
 * check gives the right hint for a directory, a missing folder, a path through
 * a file, a folder without write permission (checked as an unprivileged user
 * when the tests run as root) and a device.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"

#include "shardrec/atomic_file.h"
#include "shardrec/error.h"

#define setup    sr_test_tmpdir_setup
#define teardown sr_test_tmpdir_teardown
#define path_of  sr_test_path

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole file as a string (static buffer), or "" if it cannot be read. */
static const char *text_of(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    return buf;
}

static int count_temporaries(const char *dir)
{
    assert_string_equal(dir, sr_test_dir());
    return sr_test_count_named(".sr-tmp-", NULL);
}

static int write_atomic(const char *path, const char *text)
{
    struct sr_atomic_file af;
    int rc = sr_atomic_file_open(&af, path);
    if (rc)
        return rc;
    fputs(text, af.f);
    return sr_atomic_file_commit(&af);
}

static void test_write_replaces_whole(void **state)
{
    const char *path = path_of("a.txt");
    assert_int_equal(write_atomic(path, "one\n"), SR_OK);
    assert_string_equal(text_of(path), "one\n");
    assert_int_equal(write_atomic(path, "two\n"), SR_OK);
    assert_string_equal(text_of(path), "two\n");
    assert_int_equal(count_temporaries(sr_test_dir()), 0);

    /* the temporary file: beside the target, hidden, tagged, random, a regular file */
    struct sr_atomic_file a, b;
    struct stat st;
    assert_int_equal(sr_atomic_file_open(&a, path), SR_OK);
    assert_int_equal(sr_atomic_file_open(&b, path), SR_OK);
    char want[256];
    snprintf(want, sizeof want, "%s/.a.txt.sr-tmp-", sr_test_dir());
    assert_int_equal(strncmp(a.tmp, want, strlen(want)), 0);
    assert_int_equal(strlen(a.tmp), strlen(want) + 16);
    assert_string_not_equal(a.tmp, b.tmp);
    assert_int_equal(lstat(a.tmp, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(count_temporaries(sr_test_dir()), 2);
    fputs("aborted", a.f);
    sr_atomic_file_abort(&a);
    sr_atomic_file_abort(&a); /* a released file: no-op */
    sr_atomic_file_abort(&b);
    assert_int_equal(count_temporaries(sr_test_dir()), 0);
    assert_string_equal(text_of(path), "two\n");
}

static void test_symlinks_not_followed(void **state)
{
    const char *victim = path_of("victim.txt"), *target = path_of("link.txt");
    write_text(victim, "precious\n");
    /* a link at the target: replaced by a regular file, the linked file untouched */
    assert_int_equal(symlink(victim, target), 0);
    assert_int_equal(write_atomic(target, "new\n"), SR_OK);
    struct stat st;
    assert_int_equal(lstat(target, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_string_equal(text_of(target), "new\n");
    assert_string_equal(text_of(victim), "precious\n");

    /* links planted at the names a predictable writer would use */
    const char *out = path_of("w.bin");
    char planted[3][256];
    snprintf(planted[0], sizeof planted[0], "%s.tmp", out);
    snprintf(planted[1], sizeof planted[1], "%s/.w.bin.sr-tmp-0000000000000000", sr_test_dir());
    snprintf(planted[2], sizeof planted[2], "%s/.w.bin.sr-tmp-", sr_test_dir());
    for (int i = 0; i < 3; i++)
        assert_int_equal(symlink(victim, planted[i]), 0);
    for (int k = 0; k < 20; k++)
        assert_int_equal(write_atomic(out, "data\n"), SR_OK);
    assert_string_equal(text_of(out), "data\n");
    assert_string_equal(text_of(victim), "precious\n");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lstat(planted[i], &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        unlink(planted[i]);
    }
    unlink(target);
    unlink(out);
    unlink(victim);
}

static void test_failed_write_keeps_old(void **state)
{
    const char *path = path_of("keep.txt");
    write_text(path, "old\n");
    /* the file size limit stands in for a full disk */
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 1024;
    signal(SIGXFSZ, SIG_IGN);
    struct sr_atomic_file af;
    assert_int_equal(sr_atomic_file_open(&af, path), SR_OK);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (int i = 0; i < 1000; i++)
        fputs("0123456789abcdef", af.f);
    int rc = sr_atomic_file_commit(&af);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), path));
    assert_string_equal(text_of(path), "old\n");
    assert_int_equal(count_temporaries(sr_test_dir()), 0);

    /* a directory in the way of the rename: an error, nothing left behind */
    const char *dir = path_of("adir");
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(write_atomic(dir, "x"), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "directory"));
    assert_int_equal(count_temporaries(sr_test_dir()), 0);
    rmdir(dir);

    /* a missing folder: the hint names it */
    assert_int_equal(write_atomic(path_of("nope/x.bin"), "x"), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "does not exist"));
}

/* A write killed by SIGTERM or SIGINT removes its temporary file. */
static void test_signal_cleans_up(void **state)
{
    const int sigs[2] = {SIGTERM, SIGINT};
    const char *path = path_of("sig.txt");
    for (int i = 0; i < 2; i++) {
        write_text(path, "old\n");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct sr_atomic_file af;
            if (sr_atomic_file_open(&af, path))
                _exit(3);
            fputs("half", af.f);
            fflush(af.f);
            raise(sigs[i]);
            _exit(4); /* not reached */
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), sigs[i]);
        assert_string_equal(text_of(path), "old\n");
        assert_int_equal(count_temporaries(sr_test_dir()), 0);
    }
}

static void check_path(const char *path, enum sr_output_kind kind, const char *needle)
{
    int rc = sr_output_path_check(path, "--out", kind);
    if (!needle) {
        if (rc)
            fail_msg("%s: %s", path, sr_error_message());
        return;
    }
    if (rc != SR_ERR_IO || !strstr(sr_error_message(), needle) ||
        !strstr(sr_error_message(), "--out") || !strstr(sr_error_message(), "HINT"))
        fail_msg("%s: status %d, '%s' lacks '%s'", path, rc, sr_error_message(), needle);
}

static void test_path_checks(void **state)
{
    char file[256];
    snprintf(file, sizeof file, "%s", path_of("plain.txt"));
    write_text(file, "x");
    for (int kind = SR_OUTPUT_ATOMIC; kind <= SR_OUTPUT_STREAM; kind++) {
        check_path(path_of("new.bin"), kind, NULL);
        check_path(file, kind, NULL);
        check_path(sr_test_dir(), kind, "is a directory");
        check_path(path_of("sub/"), kind, "is a directory");
        check_path(path_of("missing/w.bin"), kind, "does not exist");
        check_path(path_of("plain.txt/w.bin"), kind, "not a folder");
        check_path("", kind, "empty");
    }
    check_path("/dev/null", SR_OUTPUT_ATOMIC, "not a regular file");
    check_path("/dev/null", SR_OUTPUT_STREAM, NULL);
    /* a link to a directory counts as the directory */
    const char *dl = path_of("dirlink");
    assert_int_equal(symlink(sr_test_dir(), dl), 0);
    check_path(dl, SR_OUTPUT_ATOMIC, "is a directory");
    unlink(dl);
}

/* A folder without write permission, checked as an unprivileged user (nobody
 * when running as root, where permissions are not enforced). */
static void test_no_permission(void **state)
{
    char ro[256];
    snprintf(ro, sizeof ro, "%s/ro", sr_test_dir());
    assert_int_equal(mkdir(ro, 0755), 0);
    assert_int_equal(chmod(sr_test_dir(), 0755), 0); /* let nobody reach ro */
    int root = geteuid() == 0;
    if (!root)
        assert_int_equal(chmod(ro, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (root && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(10);
        char target[300];
        snprintf(target, sizeof target, "%s/w.safetensors", ro);
        if (sr_output_path_check(target, "--save-weights", SR_OUTPUT_ATOMIC) != SR_ERR_IO ||
            !strstr(sr_error_message(), "no permission to write in the folder"))
            _exit(12);
        struct sr_atomic_file af;
        if (sr_atomic_file_open(&af, target) != SR_ERR_IO ||
            !strstr(sr_error_message(), "no permission"))
            _exit(13);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    chmod(ro, 0755);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    rmdir(ro);
    assert_int_equal(chmod(sr_test_dir(), 0700), 0);
}

int main(void)
{
    /* The clean-up handlers are installed only over default dispositions (an
     * ignored signal stays ignored), and a shell's background job starts with
     * SIGINT ignored: restore the defaults so the signal case tests them. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_replaces_whole),
        cmocka_unit_test(test_symlinks_not_followed),
        cmocka_unit_test(test_failed_write_keeps_old),
        cmocka_unit_test(test_signal_cleans_up),
        cmocka_unit_test(test_path_checks),
        cmocka_unit_test(test_no_permission),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
