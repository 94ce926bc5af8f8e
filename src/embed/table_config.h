/*
 * Private helpers of the EBC's config (the public contract is in
 * shardrec/ebc.h): a deep copy the EBC owns, and its release.
 */
#ifndef SHARDREC_EMBED_TABLE_CONFIG_H
#define SHARDREC_EMBED_TABLE_CONFIG_H

#include "shardrec/ebc.h"

/* Copy cfg (already validated) into dst, allocating its arrays. */
void sr_ebc_config_copy(struct sr_ebc_config *dst, const struct sr_ebc_config *cfg);
void sr_ebc_config_release(struct sr_ebc_config *cfg);

#endif
