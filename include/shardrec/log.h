/*
 * Logging. SR_LOG=warn|info|debug sets the level (default info);
 * SR_LOG_SUBSYS=comm,plan,pipe,data,embed,model,train limits debug lines to
 * those subsystems. Every line carries the rank. sr_log_rank0 prints on rank 0
 * only, for summaries.
 */
#ifndef SHARDREC_LOG_H
#define SHARDREC_LOG_H

enum sr_log_level { SR_LOG_WARN = 0, SR_LOG_INFO = 1, SR_LOG_DEBUG = 2 };

void sr_log(enum sr_log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sr_log_enabled(enum sr_log_level level, const char *subsys);

#define SR_WARN(subsys, ...)  sr_log(SR_LOG_WARN, subsys, __VA_ARGS__)
#define SR_INFO(subsys, ...)  sr_log(SR_LOG_INFO, subsys, __VA_ARGS__)
#define SR_DEBUG(subsys, ...) sr_log(SR_LOG_DEBUG, subsys, __VA_ARGS__)

#endif
