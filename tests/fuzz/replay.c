/* SPDX-License-Identifier: MIT */
/*
 * Replays fuzz inputs without libFuzzer, so the corpus and every saved crasher run in each normal
 * build (suite fuzz-regress). Arguments are files or directories (the regular files directly
 * inside, in name order); arguments starting with '-' are ignored, as libFuzzer's flags would be.
 * Each input is passed in a buffer of exactly its size, so the sanitizers see any overread. A
 * directory without files, or no input at all, is an error: a replay of nothing proves nothing.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Defined by targets that need one-time setup; NULL otherwise. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int
replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the target on one file; -1 when it cannot be read. */
static int
replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    struct stat st;
    uint8_t *data;
    size_t n;

    if (fp == NULL || fstat(fileno(fp), &st) == -1) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        if (fp != NULL)
            fclose(fp);
        return -1;
    }
    n = (size_t)st.st_size;
    data = malloc(n ? n : 1);
    if (data == NULL || fread(data, 1, n, fp) != n) {
        fprintf(stderr, "replay: %s: short read\n", path);
        free(data);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

/* Replays the regular files directly inside dir; returns how many, or -1. */
static long
replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t count = 0;
    long done = 0;

    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        char *path = malloc(len);
        char **grown = realloc(names, (count + 1) * sizeof *names);
        struct stat st;

        if (path == NULL || grown == NULL) {
            fprintf(stderr, "replay: out of memory\n");
            exit(1);
        }
        names = grown;
        snprintf(path, len, "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            names[count++] = path;
        else
            free(path);
    }
    closedir(d);
    qsort(names, count, sizeof *names, replay_cmp);
    for (size_t i = 0; i < count; i++) {
        if (done >= 0 && replay_file(names[i]) == 0)
            done++;
        else
            done = -1;
        free(names[i]);
    }
    free(names);
    if (count == 0) {
        fprintf(stderr, "replay: %s holds no files\n", dir);
        return -1;
    }
    return done;
}

int
main(int argc, char **argv)
{
    long total = 0;

    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long n;

        if (argv[i][0] == '-')
            continue;
        if (stat(argv[i], &st) == -1) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (n < 0)
            return 1;
        total += n;
    }
    printf("replayed %ld inputs\n", total);
    return total > 0 ? 0 : 1;
}
