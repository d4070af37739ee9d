/* The baseline of spec/bench/concurrency.lua: N sequential POSTs with one
 * easy handle (one keep-alive connection), plain libcurl, nothing else.
 *   curl_loop URL N BODY  ->  prints "<seconds> <requests> <connections>" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <curl/curl.h>

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata) {
  (void)ptr;
  (void)userdata;
  return size * nmemb;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  CURL *easy;
  long i, n, connects = 0;
  double start, elapsed;
  if (argc != 4) {
    fprintf(stderr, "usage: curl_loop URL N BODY\n");
    return 2;
  }
  n = strtol(argv[2], NULL, 10);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  easy = curl_easy_init();
  if (!easy) return 1;
  curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, argv[3]);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
  start = now();
  for (i = 0; i < n; i++) {
    long status = 0, c = 0;
    CURLcode rc = curl_easy_perform(easy);
    if (rc != CURLE_OK) {
      fprintf(stderr, "request %ld: %s\n", i, curl_easy_strerror(rc));
      return 1;
    }
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &c);
    connects += c;
    if (status != 200) {
      fprintf(stderr, "request %ld: HTTP %ld\n", i, status);
      return 1;
    }
  }
  elapsed = now() - start;
  printf("%.6f %ld %ld\n", elapsed, n, connects);
  curl_easy_cleanup(easy);
  curl_global_cleanup();
  return 0;
}
