/*
 * The files a command names (include/shardrec/files.h; issue 19, item 5):
 * an output is never an input or another output, compared by identity (the
 * same name, another spelling, a hard link, a symbolic link), devices never
 * clash; files read whole are regular and bounded (/dev/zero, a FIFO without
 * a writer and a file over the cap are refused at once); streamed inputs are
 * regular; JSON text holds no NUL, raw or escaped.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/files.h"

#define setup    sr_test_tmpdir_setup
#define teardown sr_test_tmpdir_teardown

/* "<dir>/name", owned by the caller. */
static char *path_of(const char *name)
{
    return sr_strdup(sr_test_path(name));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Check an input and an output: want, and on an error both flags in the message. */
static void expect_pair(const char *in, const char *out, int in_is_output, int want)
{
    const struct sr_named_file f[2] = {{"--data", in, in_is_output}, {"--metrics", out, 1}};
    int rc = sr_files_check_distinct(f, 2);
    if (rc != want)
        fail_msg("'%s' and '%s': status %d, expected %d (%s)", in, out, rc, want,
                 sr_error_message());
    if (rc && (!strstr(sr_error_message(), "--data") || !strstr(sr_error_message(), "--metrics")))
        fail_msg("message '%s' lacks a flag", sr_error_message());
}

static void test_outputs_never_inputs(void **state)
{
    const int E = SR_ERR_INVALID_ARG;
    char *v = path_of("v.tsv"), *hard = path_of("hard.tsv"), *soft = path_of("soft.tsv");
    char *other = path_of("other.tsv"), *fresh = path_of("fresh.json");
    char *sub = path_of("sub"), *fresh2 = path_of("sub/../fresh.json");
    write_text(v, "data\n");
    write_text(other, "data\n"); /* same contents, another file */
    assert_int_equal(link(v, hard), 0);
    assert_int_equal(symlink(v, soft), 0);
    assert_int_equal(mkdir(sub, 0700), 0);

    expect_pair(v, v, 0, E);
    assert_non_null(strstr(sr_error_message(), "--metrics"));
    assert_non_null(strstr(sr_error_message(), "is the file that --data"));
    expect_pair(v, hard, 0, E);
    assert_non_null(strstr(sr_error_message(), "another name or link"));
    expect_pair(soft, v, 0, E);
    expect_pair(v, other, 0, SR_OK);
    expect_pair(v, fresh, 0, SR_OK);
    /* two outputs, one not there yet, under two spellings */
    expect_pair(fresh, fresh2, 1, E);
    assert_non_null(strstr(sr_error_message(), "two outputs"));
    expect_pair(fresh, fresh, 1, E);
    /* a device is never destroyed by a write; an empty path is no file */
    expect_pair("/dev/null", "/dev/null", 1, SR_OK);
    expect_pair("", "", 1, SR_OK);
    /* inputs may share a file */
    const struct sr_named_file ins[2] = {{"--data", v, 0}, {"--eval-data", hard, 0}};
    assert_int_equal(sr_files_check_distinct(ins, 2), SR_OK);
    sr_free(v), sr_free(hard), sr_free(soft), sr_free(other), sr_free(fresh);
    sr_free(sub), sr_free(fresh2);
}

static void test_read_small(void **state)
{
    char *ok = path_of("ok.json"), *fifo = path_of("fifo"), *text;
    size_t len;
    write_text(ok, "{\"steps\": 1}");
    assert_int_equal(sr_file_read_small(ok, "the plan", 64, &text, &len), SR_OK);
    assert_int_equal(len, 12);
    assert_string_equal(text, "{\"steps\": 1}");
    sr_free(text);
    assert_int_equal(sr_file_read_small(ok, "the plan", 11, &text, &len), SR_ERR_IO);
    assert_null(text);
    assert_non_null(strstr(sr_error_message(), "12 bytes, more than the 11 accepted"));
    assert_int_equal(sr_file_read_small("/dev/zero", "the plan", 64, &text, &len), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "not a regular file but a device"));
    assert_int_equal(sr_file_read_small(sr_test_dir(), "config file", 64, &text, &len), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "Is a directory"));
    assert_int_equal(sr_file_read_small(fifo, "the plan", 64, &text, &len), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "No such file"));
    /* a FIFO without a writer: refused at once (the alarm ends a hang) */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(10);
    assert_int_equal(sr_file_read_small(fifo, "the plan", 64, &text, &len), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "not a regular file but a FIFO"));
    assert_int_equal(sr_file_check_regular(fifo, "--data"), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "--data"));
    alarm(0);
    assert_int_equal(sr_file_check_regular(ok, "--data"), SR_OK);
    assert_int_equal(sr_file_check_regular("/nonexistent/x", "--data"), SR_OK); /* the open says */
    assert_int_equal(sr_file_check_regular("/dev/zero", NULL), SR_ERR_IO);
    sr_free(ok), sr_free(fifo);
}

static void test_json_nul(void **state)
{
    const int E = SR_ERR_INVALID_ARG;
    assert_int_equal(sr_json_check_nul("{\"a\": \"b\"}", 10, "c.json"), SR_OK);
    assert_int_equal(sr_json_check_nul("{}\0{}", 5, "c.json"), E);
    assert_non_null(strstr(sr_error_message(), "c.json: a NUL byte at offset 2"));
    const char *esc = "{\"a\\u0000b\": 1}";
    assert_int_equal(sr_json_check_nul(esc, strlen(esc), "p.json"), E);
    assert_non_null(strstr(sr_error_message(), "\\u0000"));
    const char *quoted = "{\"a\\\\u0000b\": 1}"; /* a backslash, then the text u0000 */
    assert_int_equal(sr_json_check_nul(quoted, strlen(quoted), "p.json"), SR_OK);
    const char *other = "{\"a\\u0041\": 1}";
    assert_int_equal(sr_json_check_nul(other, strlen(other), "p.json"), SR_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outputs_never_inputs),
        cmocka_unit_test(test_read_small),
        cmocka_unit_test(test_json_nul),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
