/* callback_bench with its recorder in a shared library: opens
 * libgpurr_callback_bench.so (callback_bench.cpp built as a library, beside
 * this program) with dlopen, as the driver opens libgpurr_recorder.so, and
 * runs it with the same arguments. The difference from callback_bench is
 * what the real library pays for being one (thread_locals reached through
 * __tls_get_addr). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
  if (n <= 0) {
    perror("callback_bench_dlopen: /proc/self/exe");
    return 1;
  }
  path[n] = '\0';
  char* slash = strrchr(path, '/');
  strcpy(slash + 1, "libgpurr_callback_bench.so");
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "callback_bench_dlopen: %s\n", dlerror());
    return 1;
  }
  int (*bench)(int, char**) = (int (*)(int, char**))dlsym(library, "gpurr_callback_bench_main");
  if (bench == NULL) {
    fprintf(stderr, "callback_bench_dlopen: %s\n", dlerror());
    return 1;
  }
  return bench(argc, argv);
}
