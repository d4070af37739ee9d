/* A tiny assert/report harness for the C unit tests: CHECK() counts and
 * reports failures without stopping, CHECK_DONE() prints the summary and gives
 * main's exit status. */
#ifndef GEOSERVICES_CHECK_H
#define GEOSERVICES_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_total = 0;
static int check_failed = 0;

#define CHECK(cond) CHECK_MSG(cond, "%s", #cond)

/* CHECK with a printf-style explanation printed on failure. */
#define CHECK_MSG(cond, ...)                                     \
  do {                                                           \
    check_total++;                                               \
    if (!(cond)) {                                               \
      check_failed++;                                            \
      fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
    }                                                            \
  } while (0)

#define CHECK_STREQ(a, b)                                                          \
  do {                                                                             \
    const char *check_a_ = (a), *check_b_ = (b);                                   \
    CHECK_MSG(check_a_ && check_b_ && strcmp(check_a_, check_b_) == 0,             \
              "%s == %s (\"%s\" vs \"%s\")", #a, #b, check_a_ ? check_a_ : "(null)", \
              check_b_ ? check_b_ : "(null)");                                     \
  } while (0)

/* Prints "name: N checks, M failed"; returns main's exit status. */
#define CHECK_DONE(name)                                                         \
  (printf("%s: %d checks, %d failed\n", (name), check_total, check_failed), \
   check_failed ? 1 : 0)

#endif
