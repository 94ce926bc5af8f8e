/* A scratch directory per test group: created by the cmocka group setup,
 * removed with its contents by the teardown. */
#ifndef SHARDREC_TEST_TMPDIR_H
#define SHARDREC_TEST_TMPDIR_H

/* cmocka group setup/teardown: make / remove the directory. */
int sr_test_tmpdir_setup(void **state);
int sr_test_tmpdir_teardown(void **state);
/* "<dir>/<name>"; the last four results stay valid. */
const char *sr_test_path(const char *name);
/* The directory itself. */
const char *sr_test_dir(void);
/* Entries of the directory whose name holds `tag` or `other_tag` (NULL: none),
 * e.g. the atomic writes' temporaries ".sr-tmp-"; -1 if it cannot be read. */
int sr_test_count_named(const char *tag, const char *other_tag);

#endif
