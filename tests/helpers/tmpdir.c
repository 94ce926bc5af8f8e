/* Scratch directories for tests that write files (see tmpdir.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmpdir.h"

static char dir[64];

int sr_test_tmpdir_setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sr_test_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

int sr_test_tmpdir_teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

const char *sr_test_path(const char *name)
{
    static char buf[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

const char *sr_test_dir(void)
{
    return dir;
}

int sr_test_count_named(const char *tag, const char *other_tag)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += strstr(e->d_name, tag) != NULL || (other_tag && strstr(e->d_name, other_tag) != NULL);
    closedir(d);
    return n;
}
