/* Assertions shared by the cmocka suites (include after <cmocka.h>). */
#ifndef KVC_TEST_ASSERT_H
#define KVC_TEST_ASSERT_H

#include <string.h>

#include <kvcache/kvcache.h>

/* Asserts a failure with `status` whose message contains `needle`. */
#define assert_fails(call, status, needle)                                         \
  do {                                                                             \
    assert_int_equal((call), (status));                                            \
    if (strstr(kvc_last_error_message(), (needle)) == NULL)                        \
      fail_msg("message \"%s\" lacks \"%s\"", kvc_last_error_message(), (needle)); \
  } while (0)

#endif /* KVC_TEST_ASSERT_H */
