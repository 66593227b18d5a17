// Cost per page of a vmcache-style frame turnover on this VM:
//  A) discard a batch of 32 frames (MADV_DONTNEED, one process_madvise call for the batch, as
//     the pool does) and fault the new frame in (by an O_DIRECT read into it, or a write);
//  B) move a victim's frame to the new page's address with UFFDIO_MOVE, then read or write it.
// Usage: m FILE MODE(0: A, 1: B) READ(1: an O_DIRECT read of FILE, 0: a write) TURNS SIBLING
// (1: another thread of the process spins on the other CPU meanwhile).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
static volatile int stop; static char *gbase;
static void *sib(void *x) { (void)x; volatile uint64_t s = 0; while (!stop) { s += gbase[0]; } return 0; }
static double cpu(void) { struct rusage r; getrusage(RUSAGE_SELF, &r); return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6; }

#define PG 4096UL
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
struct uffdio_move { uint64_t dst, src, len, mode; int64_t move; };
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#endif
static uint64_t ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ULL + t.tv_nsec; }
static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(int argc, char **argv) {
    const char *path = argv[1];
    int mode = atoi(argv[2]);            // 0: discard+fault, 1: uffd move
    int doread = argc > 3 ? atoi(argv[3]) : 1;
    size_t npages = 1 << 18;             // 1 GiB of address space
    size_t frames = 4096;                // resident frames
    size_t iters = argc > 4 ? strtoul(argv[4], 0, 10) : 200000;
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) { perror("open"); return 1; }
    off_t fsize = lseek(fd, 0, SEEK_END);
    size_t fpages = fsize / PG;
    char *base = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    madvise(base, npages * PG, MADV_NOHUGEPAGE);
    int uffd = -1;
    if (mode == 1) {
        uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
        if (uffd < 0) { perror("userfaultfd"); return 1; }
        struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_MOVE };
        if (ioctl(uffd, UFFDIO_API, &api)) { perror("UFFDIO_API"); return 1; }
        struct uffdio_register reg = { .range = { (uint64_t)base, npages * PG }, .mode = UFFDIO_REGISTER_MODE_WP };
        if (ioctl(uffd, UFFDIO_REGISTER, &reg)) { perror("UFFDIO_REGISTER"); return 1; }
    }
    // resident set: page ids of the frames now mapped
    uint64_t *res = malloc(frames * sizeof *res);
    char *mapped = calloc(npages, 1);
    for (size_t i = 0; i < frames; i++) {
        uint64_t p; do { p = next() % npages; } while (mapped[p]);
        mapped[p] = 1; res[i] = p; base[p * PG] = 1;
    }
    uint64_t t_turn = 0, t_read = 0;
    gbase = base; pthread_t th; int sibling = argc > 5 ? atoi(argv[5]) : 0;
    if (sibling) pthread_create(&th, 0, sib, 0);
    double c0 = cpu();
    struct iovec iov[32]; int nb = 0; int pidfd = syscall(SYS_pidfd_open, getpid(), 0);
    uint64_t t0 = ns();
    for (size_t it = 0; it < iters; it++) {
        size_t slot = next() % frames;
        uint64_t victim = res[slot];
        uint64_t p; do { p = next() % npages; } while (mapped[p]);
        uint64_t a = ns();
        if (mode == 0) {
            iov[nb].iov_base = base + victim * PG; iov[nb].iov_len = PG; nb++;
            if (nb == 32) { if (syscall(SYS_process_madvise, pidfd, iov, nb, MADV_DONTNEED, 0) < 0) { perror("pmadv"); return 1; } nb = 0; }
        } else {
            struct uffdio_move mv = { .dst = (uint64_t)(base + p * PG), .src = (uint64_t)(base + victim * PG), .len = PG, .mode = 0 };
            if (ioctl(uffd, UFFDIO_MOVE, &mv)) { fprintf(stderr, "move: %s\n", strerror(errno)); return 1; }
        }
        uint64_t b = ns();
        if (doread) {
            if (pread(fd, base + p * PG, PG, (next() % fpages) * PG) != PG) { perror("pread"); return 1; }
        } else {
            base[p * PG] = 2;  // fault in by a write
        }
        uint64_t c = ns();
        t_turn += b - a; t_read += c - b;
        mapped[victim] = 0; mapped[p] = 1; res[slot] = p;
    }
    uint64_t t1 = ns();
    double c1 = cpu();
    stop = 1; if (sibling) pthread_join(th, 0);
    printf("mode %s read %d: turnover %.2f us/page, read-or-touch %.2f us/page, total %.2f us/page, cpu %.2f us/page (sibling %d)\n",
           mode ? "uffd-move" : "discard+fault", doread, t_turn / 1e3 / iters, t_read / 1e3 / iters, (t1 - t0) / 1e3 / iters, (c1 - c0) * 1e6 / iters - (sibling ? (t1 - t0) / 1e3 / iters : 0), sibling);
    return 0;
}
