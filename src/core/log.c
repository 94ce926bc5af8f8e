/*
 * Leveled logging with the rank on every line. SR_LOG and SR_LOG_SUBSYS are
 * read once, on first use.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/log.h"

static int log_level = -1;
static char log_subsys[256];

static void log_read_env(void)
{
    const char *lv = getenv("SR_LOG");
    const char *ss = getenv("SR_LOG_SUBSYS");
    log_level = SR_LOG_INFO;
    if (lv && strcmp(lv, "warn") == 0)
        log_level = SR_LOG_WARN;
    else if (lv && strcmp(lv, "debug") == 0)
        log_level = SR_LOG_DEBUG;
    if (ss)
        snprintf(log_subsys, sizeof log_subsys, ",%s,", ss);
}

int sr_log_enabled(enum sr_log_level level, const char *subsys)
{
    if (log_level < 0)
        log_read_env();
    if ((int)level > log_level)
        return 0;
    if (level == SR_LOG_DEBUG && log_subsys[0] && subsys) {
        char key[64];
        snprintf(key, sizeof key, ",%s,", subsys);
        return strstr(log_subsys, key) != NULL;
    }
    return 1;
}

void sr_log(enum sr_log_level level, const char *subsys, const char *fmt, ...)
{
    static const char *names[] = {"warn", "info", "debug"};
    char msg[2048];
    va_list ap;
    if (!sr_log_enabled(level, subsys))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] %s %s: %s\n", sr_get_rank(), names[level], subsys ? subsys : "-",
            msg);
}
