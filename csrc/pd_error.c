/* SPDX-License-Identifier: MIT */
/* The status-name table behind pd_error.h, expanded from its X-macro. */
#include "pd_error.h"

#define STATUS_NAME_(id, meaning) #id,
static const char *const status_names[] = {PD_STATUS_CODES(STATUS_NAME_)};
#undef STATUS_NAME_
_Static_assert(sizeof status_names / sizeof status_names[0] == PD_STATUS_COUNT,
               "one name per status code");

const char *pd_status_name(int code) {
    return code >= 0 && code < PD_STATUS_COUNT ? status_names[code] : NULL;
}
